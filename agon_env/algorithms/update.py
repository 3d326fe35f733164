"""The update: the GRPO loss of every stream that trains an adapter, and its optimiser steps.

The trainer (:mod:`agon_env.algorithms.trainer`) rolls out, then hands each trained role's
stream here: :meth:`Update.stream` keeps the groups with reward variance and weighs their
tokens over the whole stream; :meth:`Update.apply` runs μ optimiser steps of one adapter on
the summed loss of its streams, micro-batched, with the sampler-trainer mismatch corrected
and guarded (:mod:`.rollout_correction`) and a non-finite loss skipped. The log-probs are
taken at the temperature each completion was sampled at, read off the completions.

A finite loss can still step the weights to inf or NaN (a learning rate of 1e39 in fp32), and
every later forward would then be NaN. So each optimiser step is checked: weights that went
non-finite are rolled back with the optimiser's state, counted in ``nan_skipped``, and
:data:`NONFINITE_REPEATS` such steps in a row stop the run (:class:`NonFiniteWeights`).

The loss itself is :func:`~agon_env.algorithms.grpo.grpo_loss` (one screen); this module is
how it is fed: which sequences, which weights, which π_old, in which chunks.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from agon_env import metric_names as M
from agon_env.algorithms import distributed as dist
from agon_env.algorithms.blowup import (
    UPDATE_RATIO_MAX,
    BlowupWatch,
    Snapshot,
    restore,
    snapshot,
    update_ratio,
)
from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.errors import NonFiniteWeights
from agon_env.algorithms.grpo import group_advantages, grpo_loss, token_weights
from agon_env.algorithms.latent_logprobs import is_latent, latent_logprobs
from agon_env.algorithms.logprobs import completion_logprobs, completion_mask, micro_batches, pad_right
from agon_env.algorithms.rollout import RolloutBatch, check_trainable
from agon_env.algorithms.rollout_correction import correct, guard
from agon_env.algorithms.stream_prefix import StreamPrefix, stream_prefix
from agon_env.config import GRPOConfig
from agon_env.episodes import Turn

if TYPE_CHECKING:
    from agon_env.agents.adapters import SharedBase

NONFINITE_REPEATS = 2
"""Optimiser steps in a row whose weights went non-finite (each rolled back) that stop the run."""


def all_finite(params: list[torch.Tensor]) -> bool:
    """Whether every value of ``params`` is finite (one check on the device, one sync)."""
    flags = [torch.isfinite(p).all() for p in params]
    return bool(torch.stack(flags).all()) if flags else True


def sampled_temperature(turns: list[Turn]) -> float:
    """The temperature the turns' completions were sampled at (one adapter's: one value), read
    off the completions themselves, so the update's log-probs match what the sampler drew."""
    found = {t.completion.temperature for t in turns}
    if len(found) != 1 or None in found:
        raise ValueError(
            "a stream's completions must carry the one temperature they were sampled at, "
            f"got {sorted(map(str, found))}"
        )
    return float(found.pop())  # type: ignore[arg-type]


@dataclass
class StreamBatch:
    """The kept sequences of one role stream, ready for the loss."""

    role: str
    turns: list[Turn]
    advantages: torch.Tensor
    weights: torch.Tensor
    """``[S, T]`` aggregation weights computed over the whole stream (micro-batch safe)."""
    temperature: float
    old_logp: dict[int, torch.Tensor] = field(default_factory=dict)
    """Per micro-batch: the trainer's log-probs before the update (π_old of the clipped ratio)."""
    is_weights: dict[int, torch.Tensor] = field(default_factory=dict)
    """Per micro-batch: the sampler-to-trainer importance weights (:mod:`.rollout_correction`)."""


@dataclass
class Update:
    """How one run updates its adapters: the shared base, the GRPO settings and the process group."""

    base: SharedBase
    """The :class:`~agon_env.agents.adapters.SharedBase` whose adapters train."""
    grpo: GRPOConfig
    budget: int
    """``sampling.max_new_tokens``: the Dr. GRPO normaliser."""
    max_seq_len: int
    """Longest prompt + completion the update takes (``model.max_seq_len``)."""
    ctx: DistContext = field(default_factory=DistContext)
    counters: dict[str, float] = field(default_factory=lambda: {"nan_skipped": 0, "updates": 0})
    """``nan_skipped`` and ``updates`` over the run (the trainer checkpoints them)."""
    nonfinite_streak: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Per adapter: optimiser steps in a row whose weights went non-finite (rolled back)."""
    watch: BlowupWatch = field(init=False)
    """Finite steps that wreck the adapter (:mod:`.blowup`): ``blowups`` in :attr:`counters`."""

    def __post_init__(self) -> None:
        self.watch = BlowupWatch(self.counters)

    def stream(self, batch: RolloutBatch, role: str) -> tuple[StreamBatch | None, torch.Tensor]:
        """The kept groups of ``role``'s stream, weighted and ready for the loss (``None`` when
        every group was dropped), and which groups were kept."""
        adv, keep = group_advantages(batch.rewards(role), self.grpo.advantage)
        n = batch.num_generations
        turns = batch.stream(role)
        idx = [i for i in range(len(turns)) if keep[i // n]]
        # Sorted by prompt, so each micro-batch holds prompts with the longest common prefix
        # (challengers shown no draft read drafting prompts), which the forward shares.
        idx.sort(key=lambda i: turns[i].completion.prompt_ids)
        chosen = [turns[i] for i in idx]
        mask = completion_mask([t.completion.completion_ids for t in chosen]) if chosen else None
        # The normalisers count the *whole* stream -- dropped groups included, as TRL and
        # Dr. GRPO do -- so a kept sequence weighs the same however many groups were dropped
        # and ablations with different drop rates compare. Summed over all ranks (every rank
        # takes part, also one without kept groups), so the ranks' losses add up.
        n_seqs, n_tokens = dist.all_sum(
            [len(turns), float(sum(len(t.completion.completion_ids) for t in turns))], self.ctx
        )
        if mask is None:
            return None, keep
        check_trainable(chosen, self.max_seq_len, batch)
        weights = token_weights(mask, self.grpo.aggregation, self.budget, n_seqs=n_seqs, n_tokens=n_tokens)
        sb = StreamBatch(role, chosen, adv.flatten()[idx], weights, sampled_temperature(chosen))
        return sb, keep

    def logprobs(
        self, turns: list[Turn], temperature: float, prefix: StreamPrefix | None = None
    ) -> torch.Tensor:
        """The active adapter's per-token log-probs of the turns' completions at ``temperature``."""
        cs, pad = [t.completion for t in turns], self.base.tokenizer.pad_token_id or 0
        if is_latent(cs):  # sampled on the paired draft's cache: the same cache here
            return latent_logprobs(self.base.model, cs, temperature=temperature, pad_id=pad)
        prompts, completions = [c.prompt_ids for c in cs], [c.completion_ids for c in cs]
        kw = {"temperature": temperature, "pad_id": pad, "prefix": prefix}
        return completion_logprobs(self.base.model, prompts, completions, **kw)

    def apply(
        self,
        adapter: str,
        streams: list[StreamBatch],
        optimizer: torch.optim.Optimizer,
        *,
        step: int,
        version: int | None = None,
        scale: float = 1.0,
    ) -> dict[str, float]:
        """μ optimiser steps on the summed GRPO loss of every stream that trains ``adapter``.

        With several processes, gradients and the loss are summed over ranks before the
        clip and the step, so every rank applies the same update. ``version`` is the adapter's
        version in the sampling engine (the on-policy guard names it); ``scale`` weighs the
        loss (an adapter trained by two streams takes their mean).
        """
        if not dist.all_max([float(bool(streams))], self.ctx)[0]:
            return {}
        g, opt = self.grpo, optimizer
        params = self.base.parameters(adapter)
        stats: dict[str, list[float]] = defaultdict(list)
        onpolicy: dict[str, float] = {}
        self.base.model.train()
        try:
            with self.base.use(adapter):
                for it in range(g.inner_iters):
                    opt.zero_grad(set_to_none=True)
                    total = 0.0
                    seen: dict[str, float] = defaultdict(float)
                    for sb in streams:
                        total += self._accumulate(sb, stats, scale, seen if it == 0 else None)
                    if it == 0:  # before any step: the guard stops the run before a bad update
                        onpolicy = guard(seen, self.ctx, g.onpolicy_max_kl, adapter, version, step)
                    dist.all_reduce_grads(params, self.ctx)
                    total = dist.all_sum([total], self.ctx)[0]
                    norm = torch.nn.utils.clip_grad_norm_(params, g.max_grad_norm or float("inf"))
                    if not (math.isfinite(total) and math.isfinite(float(norm))):
                        self.counters["nan_skipped"] += 1
                        msg = f"step {step}: {adapter}: non-finite loss/grad ({total}); update skipped"
                        warnings.warn(msg, RuntimeWarning, stacklevel=2)
                        opt.zero_grad(set_to_none=True)
                        continue
                    before = snapshot(params, opt)
                    opt.step()
                    if not dist.all_max([float(not all_finite(params))], self.ctx)[0]:
                        self.nonfinite_streak[adapter] = 0
                    else:
                        self._roll_back(adapter, params, opt, before, step)
                        continue
                    if self._blew_up(adapter, params, opt, before, step):
                        continue
                    self.counters["updates"] += 1
                    stats[M.LOSS].append(total)
                    stats[M.GRAD_NORM].append(float(norm))
        finally:
            self.base.model.eval()
        out = {f"{k}/{adapter}": sum(v) / len(v) for k, v in stats.items() if v}
        return {**out, **{M.key(M.ONPOLICY, k, adapter): v for k, v in onpolicy.items()}}

    def _roll_back(
        self,
        adapter: str,
        params: list[torch.Tensor],
        opt: torch.optim.Optimizer,
        before: Snapshot,
        step: int,
    ) -> None:
        """Undo a step that made ``adapter``'s weights non-finite; stop when it keeps happening."""
        restore(params, opt, before)
        self.counters["nan_skipped"] += 1
        self.nonfinite_streak[adapter] += 1
        lr = opt.param_groups[0]["lr"]
        if self.nonfinite_streak[adapter] >= NONFINITE_REPEATS:
            raise NonFiniteWeights(
                f"step {step}: {adapter}'s weights went non-finite on {self.nonfinite_streak[adapter]} "
                f"updates in a row (each rolled back; nothing non-finite was saved): lower --optim.lr "
                f"({lr:g} now) or check the model's dtype"
            )
        msg = f"step {step}: {adapter}: the update made its weights non-finite (lr {lr:g}); rolled back"
        warnings.warn(msg, RuntimeWarning, stacklevel=3)

    def _blew_up(
        self,
        adapter: str,
        params: list[torch.Tensor],
        opt: torch.optim.Optimizer,
        before: Snapshot,
        step: int,
    ) -> bool:
        """Undo a finite step that moved ``adapter`` by more than itself (:mod:`.blowup`)."""
        ratio = dist.all_max([update_ratio(params, before[0])], self.ctx)[0]
        if ratio <= UPDATE_RATIO_MAX:
            self.watch.passed(adapter)
            return False
        restore(params, opt, before)  # first: a run stopped below holds nothing of the blow-up
        lr = opt.param_groups[0]["lr"]
        what = f"‖Δθ‖/‖θ‖ = {ratio:.3g} > {UPDATE_RATIO_MAX:g} at lr {lr:g}"
        warnings.warn(f"step {step}: {adapter}: {what}; rolled back", RuntimeWarning, stacklevel=3)
        self.watch.blew_up(adapter, step, what)
        return True

    def _accumulate(
        self,
        sb: StreamBatch,
        stats: dict[str, list[float]],
        scale: float = 1.0,
        seen: dict[str, float] | None = None,
    ) -> float:
        """Backward ``scale`` × the stream's loss micro-batch by micro-batch; return its value.

        On the first inner iteration (``seen`` given) each micro-batch's forward *is* the
        trainer's π_old: it is kept, the importance weights against the sampler's log-probs
        are computed from it, and the mismatch sums go into ``seen``. No extra forward."""
        g, total = self.grpo, 0.0
        prompts = [t.completion.prompt_ids for t in sb.turns]  # the shared part runs once per pass:
        # (A latent stream reads its own cached draft prefix instead: latent_logprobs.)
        reuse = not is_latent([t.completion for t in sb.turns])
        prefix = stream_prefix(self.base.model, prompts) if reuse else None
        shared = len(prefix.ids) if prefix else 0  # a micro-batch is sized by what its rows add
        lengths = [len(t.completion.prompt_ids) + len(t.completion.completion_ids) - shared for t in sb.turns]
        for k, part in enumerate(micro_batches(lengths, g.micro_batch, g.micro_batch_tokens)):
            turns, w = sb.turns[part], sb.weights[part]
            width = w.shape[1]
            logp = self.logprobs(turns, sb.temperature, prefix)
            logp = torch.nn.functional.pad(logp, (0, width - logp.shape[1]))
            dev = logp.device
            if seen is not None:
                sampler = pad_right([t.completion.logprobs for t in turns], width).to(dev)
                sb.old_logp[k] = logp.detach()
                mask = (w != 0).to(dev)
                kind, cap = g.rollout_correction, g.rollout_correction_cap
                sb.is_weights[k] = correct(sb.old_logp[k], sampler, mask, kind, cap, seen)
            ref = None
            if g.beta:
                with torch.no_grad(), self.base.reference():
                    ref = self.logprobs(turns, sb.temperature)
                    ref = torch.nn.functional.pad(ref, (0, width - ref.shape[1]))
            clip = {"eps": g.eps, "eps_high": g.eps_high, "beta": g.beta, "ref_logp": ref}
            adv, wt = sb.advantages[part].to(dev), w.to(dev)
            loss, st = grpo_loss(logp, sb.old_logp[k], adv, wt, is_weights=sb.is_weights[k], **clip)
            loss = loss * scale
            if torch.isfinite(loss):
                loss.backward()
            total += float(loss.detach())
            for name in ("clip_frac", "kl", "ratio_mean"):
                stats[name].append(st[name])
        if prefix is not None:  # its gradient, summed over the micro-batches, sent back once
            prefix.backward()
        return total
