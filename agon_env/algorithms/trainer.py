"""One training step: sample problems, roll out B×N episodes, update each trained stream.

:meth:`Trainer.train_step` reads as its four phases, for any algorithm plugin:

1. **rollout** -- the plugin says who drafts (role schedule); B problems from the
   sampler; :func:`~agon_env.algorithms.rollout.rollout` plays B×N episodes in lockstep;
   the pair's divergence is measured on them before anything moves;
2. **streams** -- per trained role: ``[B, N]`` rewards -> group-relative advantages,
   σ = 0 groups dropped, token weights over the whole stream;
3. **update** -- per adapter: the GRPO loss of every stream that trains it,
   micro-batched, μ inner iterations, its own AdamW + schedule; a non-finite loss skips;
   the sampler-trainer mismatch is corrected and guarded (:mod:`.rollout_correction`);
4. **metrics** -- the step's figures, returned to :func:`agon_env.algorithms.run.train`,
   which logs them and checkpoints (``save`` / ``restore`` live here).

Nothing here branches on the algorithm's name: the plugin's fields decide. Under
``torchrun`` (or ``accelerate launch --multi_gpu``) each process plays a shard of the step's problems
and the collectives of :mod:`~agon_env.algorithms.distributed` (normalisers, gradients,
metrics) make N processes compute the step one process would; rank 0 alone writes.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agon_env import metric_names as M
from agon_env.algorithms import distributed as dist
from agon_env.algorithms.builders import BACKENDS, build_agents, build_base, build_env
from agon_env.algorithms.checkpoint import (
    RunIdentity,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
)
from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.grpo import group_advantages, grpo_loss, k3_kl, token_weights
from agon_env.algorithms.latent_logprobs import is_latent, latent_figures, latent_logprobs
from agon_env.algorithms.logprobs import completion_logprobs, completion_mask, micro_batches, pad_right
from agon_env.algorithms.metrics import merge_samples, metric_samples, rendered_samples, summarize
from agon_env.algorithms.registry import AlgorithmPlugin, get_algorithm
from agon_env.algorithms.rollout import RolloutBatch, TaskScoreError, check_scoring, check_trainable, rollout
from agon_env.algorithms.rollout_correction import OnPolicyError, correct, guard
from agon_env.algorithms.run_log import peak_rss_mb
from agon_env.algorithms.sampler import ProblemSampler
from agon_env.algorithms.schedules import lr_lambda
from agon_env.algorithms.stream_prefix import stream_prefix
from agon_env.algorithms.validation import resolve
from agon_env.config import TrainConfig
from agon_env.episodes import Turn
from agon_env.resolved import ResolvedRun
from agon_env.seeding import derive_seed
from agon_env.vocabulary import CHALLENGER, DRAFTER

__all__ = ["OnPolicyError", "TaskScoreError", "Trainer"]


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
class Trainer:
    run: ResolvedRun
    """The run as resolved once (:mod:`agon_env.resolved`); the trainer derives none of it."""
    plugin: AlgorithmPlugin
    env: Any
    base: Any
    backend: Any
    agents: dict[str, Any]
    optimizers: dict[str, torch.optim.Optimizer]
    schedulers: dict[str, Any]
    sampler: ProblemSampler
    ctx: DistContext = field(default_factory=DistContext)
    step: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    """The last step's prompts and completions (:func:`~agon_env.algorithms.metrics.rendered_samples`)."""
    counters: dict[str, float] = field(default_factory=lambda: {"nan_skipped": 0, "updates": 0})

    # -- construction ---------------------------------------------------------------------

    @property
    def cfg(self) -> TrainConfig:
        """The run's config, for the settings it does not derive (``grpo``, ``optim``, ...)."""
        return self.run.config

    @classmethod
    def build(cls, run: ResolvedRun | TrainConfig, ctx: DistContext | None = None) -> Trainer:
        """The trainer of ``run``; a config is resolved first
        (:func:`~agon_env.algorithms.validation.resolve`)."""
        if isinstance(run, TrainConfig):
            run = resolve(run)
        cfg = run.config
        ctx = ctx or DistContext(device=run.device)
        dist.check_batch(cfg.batch_problems, ctx)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        plugin = get_algorithm(run.algo).mirrored(cfg.first_drafter)
        env = build_env(run)
        base = build_base(run)
        backend = BACKENDS[cfg.model.backend](run, base)
        agents = build_agents(run, base, backend, env.task)
        optimizers: dict[str, torch.optim.Optimizer] = {}
        schedulers = {}
        for name in plugin.adapters:
            opt = torch.optim.AdamW(
                base.parameters(name), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay
            )
            optimizers[name] = opt
            schedulers[name] = torch.optim.lr_scheduler.LambdaLR(
                opt, lr_lambda(cfg.steps, cfg.optim.warmup_ratio, cfg.optim.schedule)
            )
        sampler = ProblemSampler(len(env.task), seed=derive_seed(cfg.seed, "problems"))
        return cls(run, plugin, env, base, backend, agents, optimizers, schedulers, sampler, ctx)

    @property
    def identity(self) -> RunIdentity:
        m = self.cfg.model
        return RunIdentity(m.name, tuple(self.plugin.adapters), m.lora_r, m.lora_alpha)

    # -- checkpoints ---------------------------------------------------------------------

    def save(self, run_dir: Path) -> None:
        save_checkpoint(
            run_dir,
            step=self.step,
            identity=self.identity,
            adapters={n: self.base.adapter_state_dict(n) for n in self.plugin.adapters},
            optimizers=self.optimizers,
            schedulers=self.schedulers,
            sampler=self.sampler.state_dict(),
            counters=dict(self.counters),
        )

    def restore(self, run_dir: Path) -> None:
        state = load_checkpoint(run_dir, self.identity)
        for name in self.plugin.adapters:
            self.base.load_adapter_state_dict(name, state["adapters"][name])
            self.optimizers[name].load_state_dict(state["optimizers"][name])
            self.schedulers[name].load_state_dict(state["schedulers"][name])
        self.sampler.load_state_dict(state["sampler"])
        self.counters.update(state["counters"])
        self.step = int(state["step"])
        set_rng_state(state["rng"])
        self._sync(self.plugin.adapters)

    def _sync(self, adapters: Any) -> None:
        """Publish new adapter weights to a backend that keeps its own copy (vLLM)."""
        sync = getattr(self.backend, "sync", None)
        if callable(sync):
            for name in adapters:
                sync(name)

    # -- one step ------------------------------------------------------------------------

    def train_step(self) -> dict[str, float]:
        # Seeds anything that draws from torch's global RNG (dropout, if any); sampling
        # seeds are per turn (see rollout), so a resumed run repeats the same step.
        torch.manual_seed(derive_seed(self.cfg.seed, "step", self.step))
        t0 = time.perf_counter()
        seats = self.plugin.seats(self.step)
        batch, local = self._rollout(seats)
        streams = self._streams(batch, local)
        t_update = time.perf_counter()
        self._update_all(streams, local)
        t_end = time.perf_counter()
        local.update(
            {
                M.TIME_ROLLOUT: batch.gen_seconds,
                M.TIME_SCORING: batch.score_seconds,
                M.TIME_UPDATE: t_end - t_update,
                M.TIME_STEP: t_end - t0,
                M.PEAK_RSS: peak_rss_mb(),
            }
        )
        metrics = self._metrics(batch, local)
        self.samples = rendered_samples(batch, self.base.tokenizer, self.cfg.samples_per_role)
        self.step += 1
        return metrics

    # -- the four phases ----------------------------------------------------------------

    def _rollout(self, seats: dict[str, str]) -> tuple[RolloutBatch, dict[str, float]]:
        """B×N episodes of this rank's shard, and the pair's divergence before any update."""
        cfg = self.cfg
        # Every rank draws the same global batch and plays its own shard of whole groups.
        problems, first = dist.shard(self.sampler.take(cfg.batch_problems), self.ctx)
        batch = rollout(
            self.env,
            self.agents,
            problems,
            cfg.grpo.num_generations,
            drafter=seats[DRAFTER],
            seed=cfg.seed,
            step=self.step,
            episode_offset=first * cfg.grpo.num_generations,
        )
        check_scoring(batch, self.step, self.ctx)
        return batch, {**self._divergence_kl(batch, seats), **latent_figures(batch.turns)}

    def _streams(self, batch: RolloutBatch, local: dict[str, float]) -> dict[str, list[StreamBatch]]:
        """Each trained role's kept groups, keyed by the adapter they update."""
        streams: dict[str, list[StreamBatch]] = defaultdict(list)
        kept = total = 0
        for role, adapter in self.plugin.updates(self.step).items():
            sb, keep = self._stream(batch, role, adapter)
            k, n = dist.all_sum([int(keep.sum()), keep.numel()], self.ctx)
            local[M.key(M.GROUPS_DROPPED, role)] = 1.0 - k / max(1.0, n)
            kept, total = kept + k, total + n
            if sb is not None:
                streams[adapter].append(sb)
        local[M.GROUPS_DROPPED] = 1.0 - kept / max(1.0, total)
        return streams

    def _update_all(self, streams: dict[str, list[StreamBatch]], local: dict[str, float]) -> None:
        """One update per adapter (its schedule steps even when all its groups were dropped)."""
        trained = list(self.plugin.updates(self.step).values())
        for name in self.plugin.adapters:
            # An adapter trained by two streams (self-refine) takes their mean, so its
            # update has the scale of one stream, like each adapter of the two-seat recipes.
            stats = self._update(name, streams.get(name, []), scale=1.0 / max(1, trained.count(name)))
            local.update(stats)
            if stats:  # updated on every rank, also one that held none of the kept groups
                self._sync([name])
            local[M.key(M.LR, name)] = self.schedulers[name].get_last_lr()[0]
            with warnings.catch_warnings():
                # The schedule follows training steps, also those whose groups were all dropped.
                warnings.filterwarnings(
                    "ignore", message="Detected call of `lr_scheduler.step", category=UserWarning
                )
                self.schedulers[name].step()

    def _metrics(self, batch: RolloutBatch, local: dict[str, float]) -> dict[str, float]:
        """The step's figures over all ranks: rollout outcomes plus the trainer's own."""
        local[M.NAN_SKIPPED] = float(self.counters["nan_skipped"])
        local[M.EPOCH] = float(self.sampler.epoch)
        samples = merge_samples(dist.all_gather_objects(metric_samples(batch), self.ctx))
        metrics = {**summarize(samples), **dist.reduce_step_metrics(local, self.ctx)}
        metrics[M.TOKENS_PER_S] = metrics.get(M.TOKENS, 0.0) / max(metrics[M.TIME_ROLLOUT], 1e-9)
        return metrics

    # -- helpers ----------------------------------------------------------------------

    def _stream(
        self, batch: RolloutBatch, role: str, adapter: str
    ) -> tuple[StreamBatch | None, torch.Tensor]:
        adv, keep = group_advantages(batch.rewards(role), self.cfg.grpo.advantage)
        n = batch.num_generations
        turns = batch.stream(role)
        idx = [i for i in range(len(turns)) if keep[i // n]]
        # Sorted by prompt, so each micro-batch holds prompts with the longest common prefix
        # (hidden-mode challengers read drafting prompts), which the forward shares.
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
        check_trainable(chosen, self.cfg.model.max_seq_len, batch)
        g, budget = self.cfg.grpo, self.cfg.sampling.max_new_tokens
        weights = token_weights(mask, g.aggregation, budget, n_seqs=n_seqs, n_tokens=n_tokens)
        sb = StreamBatch(role, chosen, adv.flatten()[idx], weights, sampled_temperature(chosen))
        return sb, keep

    def _logprobs(self, turns: list[Turn], temperature: float, prefix: Any = None) -> torch.Tensor:
        cs, pad = [t.completion for t in turns], self.base.tokenizer.pad_token_id or 0
        if is_latent(cs):  # sampled on the paired draft's cache: the same cache here
            return latent_logprobs(self.base.model, cs, temperature=temperature, pad_id=pad)
        prompts, completions = [c.prompt_ids for c in cs], [c.completion_ids for c in cs]
        kw = {"temperature": temperature, "pad_id": pad, "prefix": prefix}
        return completion_logprobs(self.base.model, prompts, completions, **kw)

    def _update(self, adapter: str, streams: list[StreamBatch], scale: float = 1.0) -> dict[str, float]:
        """μ optimiser steps on the summed GRPO loss of every stream that trains ``adapter``.

        With several processes, gradients and the loss are summed over ranks before the
        clip and the step, so every rank applies the same update.
        """
        if not dist.all_max([float(bool(streams))], self.ctx)[0]:
            return {}
        g, opt = self.cfg.grpo, self.optimizers[adapter]
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
                        version = getattr(self.backend, "versions", {}).get(adapter)
                        onpolicy = guard(seen, self.ctx, g.onpolicy_max_kl, adapter, version, self.step)
                    dist.all_reduce_grads(params, self.ctx)
                    total = dist.all_sum([total], self.ctx)[0]
                    norm = torch.nn.utils.clip_grad_norm_(params, g.max_grad_norm or float("inf"))
                    if not (math.isfinite(total) and math.isfinite(float(norm))):
                        self.counters["nan_skipped"] += 1
                        msg = f"step {self.step}: {adapter}: non-finite loss/grad ({total}); update skipped"
                        warnings.warn(msg, RuntimeWarning, stacklevel=2)
                        opt.zero_grad(set_to_none=True)
                        continue
                    opt.step()
                    self.counters["updates"] += 1
                    stats[M.LOSS].append(total)
                    stats[M.GRAD_NORM].append(float(norm))
        finally:
            self.base.model.eval()
        out = {f"{k}/{adapter}": sum(v) / len(v) for k, v in stats.items() if v}
        return {**out, **{M.key(M.ONPOLICY, k, adapter): v for k, v in onpolicy.items()}}

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
        g, total = self.cfg.grpo, 0.0
        prompts = [t.completion.prompt_ids for t in sb.turns]  # the shared part runs once per pass:
        # (A latent stream reads its own cached draft prefix instead: latent_logprobs.)
        reuse = not is_latent([t.completion for t in sb.turns])
        prefix = stream_prefix(self.base.model, prompts) if reuse else None
        shared = len(prefix.ids) if prefix else 0  # a micro-batch is sized by what its rows add
        lengths = [len(t.completion.prompt_ids) + len(t.completion.completion_ids) - shared for t in sb.turns]
        for k, part in enumerate(micro_batches(lengths, g.micro_batch, g.micro_batch_tokens)):
            turns, w = sb.turns[part], sb.weights[part]
            width = w.shape[1]
            logp = self._logprobs(turns, sb.temperature, prefix)
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
                    ref = self._logprobs(turns, sb.temperature)
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

    @torch.no_grad()
    def _divergence_kl(self, batch: RolloutBatch, seats: dict[str, str]) -> dict[str, float]:
        """Mean per-token KL(π_drafter ‖ π_rival) on the step's first drafts (shared rollouts)."""
        k = self.cfg.divergence_kl_rollouts
        if k == 0 or len(self.plugin.adapters) < 2:
            return {}
        turns = [t for t in batch.stream(DRAFTER)[:k] if t.completion.completion_ids]
        if not turns:
            return {}
        # The drafter's own log-probs came with its samples; only the rival needs a forward.
        own = [t.completion.logprobs for t in turns]
        own = pad_right(own, max(map(len, own)))
        with self.base.use(seats[CHALLENGER]):
            rival = self._logprobs(turns, sampled_temperature(turns))
        mask = completion_mask([t.completion.completion_ids for t in turns]).to(rival.device)
        kl = k3_kl(own.to(rival.device), rival)  # k3: unbiased and never negative, unlike the plain log-ratio
        return {M.KL: float((kl * mask).sum() / mask.sum().clamp(min=1))}
