"""Data parallelism across processes started by ``torchrun`` (or ``accelerate launch --multi_gpu``).

    torchrun --standalone --nproc-per-node 2 --no-python agon train --batch-problems 8 ...
    accelerate launch --multi_gpu --num_processes 8 -m agon_env.algorithms.commands.train ...

Both launchers set ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK``; :func:`init_from_env` reads
them and joins the ``torch.distributed`` process group (gloo on CPU, NCCL on CUDA). The
same config runs with 1 or N processes, and N processes compute the same step as one:

* **Data.** Every rank draws the same global batch of ``batch_problems`` problems from the
  same seeded sampler and keeps a contiguous shard of whole groups (:func:`shard`), so
  group-relative advantages need no communication. Sampling seeds are per episode, keyed
  by the *global* episode index, so a rollout does not depend on how episodes are split.
* **Loss.** The aggregation's normalisers (the stream's sequences and tokens) are summed over ranks
  before any loss is formed, so the ranks' local losses add up to the one-process loss.
* **Gradients.** Each adapter's LoRA gradients are summed over ranks (one flat
  all-reduce per optimiser step) before clipping. Every rank then clips and steps the same
  gradient from the same state, so the adapters stay identical without weight broadcasts.
* **Writes.** Rank 0 alone writes metrics, checkpoints, adapters and plots.

Why not ``torch.nn.parallel.DistributedDataParallel``: it wraps one module and reduces
every trainable parameter on every backward. Here one frozen base carries several
adapters, each trained by its own optimiser in its own pass, and a rank may hold no kept
group for an adapter in a step (DDP would then hang waiting for its hooks). The explicit
reduction below is the same collective DDP issues, done once per optimiser step.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist

from agon_env.metric_names import MAX_ACROSS_RANKS

T = TypeVar("T")


@dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job; the default is a plain single process."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: str = "cpu"
    """Where collective tensors live (NCCL needs CUDA tensors, gloo CPU ones)."""

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_from_env(device: str) -> DistContext:
    """Join the process group a launcher described in the environment (or run alone).

    ``device`` is the resolved training device (``cpu`` / ``cuda``); on CUDA each rank
    takes ``cuda:LOCAL_RANK``.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext(device=device)
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return DistContext(rank, world, local, f"cuda:{local}" if cuda else "cpu")


def shutdown(ctx: DistContext) -> None:
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()


def shard(items: Sequence[T], ctx: DistContext) -> tuple[list[T], int]:
    """This rank's contiguous share of ``items`` and the global index of its first item."""
    n = len(items)
    if n % ctx.world:
        raise ValueError(f"{n} items cannot be split evenly over {ctx.world} processes")
    size = n // ctx.world
    lo = ctx.rank * size
    return list(items[lo : lo + size]), lo


def _reduce(values: Sequence[float], ctx: DistContext, op: dist.ReduceOp.RedOpType) -> list[float]:
    # float64, so counts stay exact.
    if not ctx.enabled:
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def all_sum(values: Sequence[float], ctx: DistContext) -> list[float]:
    """Element-wise sum of a few numbers over ranks."""
    return _reduce(values, ctx, dist.ReduceOp.SUM)


def all_max(values: Sequence[float], ctx: DistContext) -> list[float]:
    """Element-wise maximum of a few numbers over ranks."""
    return _reduce(values, ctx, dist.ReduceOp.MAX)


def all_reduce_grads(params: Iterable[torch.nn.Parameter], ctx: DistContext) -> None:
    """Sum the gradients of ``params`` over ranks, in place, with one flat all-reduce.

    A parameter without a gradient (no kept group on this rank) contributes zeros, and
    gets the summed gradient like every other rank.
    """
    if not ctx.enabled:
        return
    params = [p for p in params if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads]).to(ctx.device)
    dist.all_reduce(flat)
    flat = flat.to(params[0].device) if params else flat
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n


def all_gather_objects(obj: T, ctx: DistContext) -> list[T]:
    """Every rank's ``obj`` (picklable), in rank order."""
    if not ctx.enabled:
        return [obj]
    out: list[T | None] = [None] * ctx.world
    dist.all_gather_object(out, obj)
    return out


def agree(flag: bool, ctx: DistContext) -> bool:
    """Rank 0's ``flag`` on every rank (decisions such as "the time budget is spent")."""
    if not ctx.enabled:
        return flag
    box = [flag]
    dist.broadcast_object_list(box, src=0)
    return bool(box[0])


def barrier(ctx: DistContext) -> None:
    if ctx.enabled:
        dist.barrier()


def check_batch(batch_problems: int, ctx: DistContext) -> None:
    """Refuse a global batch that the processes cannot share out by whole problems."""
    from agon_env.config import ConfigError

    if batch_problems % ctx.world:
        raise ConfigError(
            f"batch_problems={batch_problems} cannot be split over {ctx.world} processes: "
            f"use a multiple of {ctx.world} (it is the global batch, shared out by problem)"
        )


def reduce_step_metrics(local: dict[str, float], ctx: DistContext) -> dict[str, float]:
    """One view of a step: times and memory are the largest rank's, everything else the ranks' mean.

    Losses and gradient norms are already global (summed before use), so every rank
    holds the same value and the mean returns it.
    """
    parts = all_gather_objects(local, ctx)
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for part in parts for k in part):
        values = [part[key] for part in parts if key in part]
        out[key] = max(values) if key.startswith(MAX_ACROSS_RANKS) else sum(values) / len(values)
    return out
