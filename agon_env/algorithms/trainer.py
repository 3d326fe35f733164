"""One training step: sample problems, roll out B×N episodes, update each trained stream.

:meth:`Trainer.train_step` reads as its four phases, for any algorithm plugin:

1. **rollout** -- the plugin says who drafts (role schedule); B problems from the
   sampler; :func:`~agon_env.algorithms.rollout.rollout` plays B×N episodes in lockstep;
   the pair's divergence is measured on them before anything moves;
2. **streams** -- per trained role: ``[B, N]`` rewards -> group-relative advantages,
   σ = 0 groups dropped, token weights over the whole stream (:meth:`.update.Update.stream`);
3. **update** -- per adapter: the GRPO loss of every stream that trains it,
   micro-batched, μ inner iterations, its own AdamW + schedule; a non-finite loss skips;
   the sampler-trainer mismatch is corrected and guarded (:mod:`.update`, :mod:`.rollout_correction`);
4. **metrics** -- the step's figures, returned to :func:`agon_env.algorithms.run.train`,
   which logs them and checkpoints (``save`` / ``restore`` live here).

Nothing here branches on the algorithm's name: the plugin's fields decide. Under
``torchrun`` (or ``accelerate launch --multi_gpu``) each process plays a shard of the step's problems
and the collectives of :mod:`~agon_env.algorithms.distributed` (normalisers, gradients,
metrics) make N processes compute the step one process would; rank 0 alone writes.
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from agon_env import metric_names as M
from agon_env.agents.adapters import SharedBase
from agon_env.agents.protocol import Agent, Backend
from agon_env.algorithms import distributed as dist
from agon_env.algorithms.blowup import restore, snapshot, unusable_counts
from agon_env.algorithms.builders import build_agents, build_base, build_env
from agon_env.algorithms.checkpoint import (
    RunIdentity,
    load_checkpoint,
    save_checkpoint,
    set_rng_state,
)
from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.grpo import k3_kl
from agon_env.algorithms.latent_logprobs import latent_figures
from agon_env.algorithms.logprobs import completion_mask, pad_right
from agon_env.algorithms.metrics import merge_samples, metric_samples, rendered_samples, summarize
from agon_env.algorithms.registry import AlgorithmPlugin, get_algorithm
from agon_env.algorithms.rollout import RolloutBatch, ScoringWatch, TaskScoreError, rollout
from agon_env.algorithms.rollout_correction import OnPolicyError
from agon_env.algorithms.sampler import ProblemSampler
from agon_env.algorithms.schedules import lr_lambda
from agon_env.algorithms.update import NonFiniteWeights, StreamBatch, Update, all_finite, sampled_temperature
from agon_env.config import TrainConfig, to_dict
from agon_env.episodes import TaskEnv
from agon_env.json_value import JSONRecord
from agon_env.resolved import ResolvedRun
from agon_env.runtime import BACKENDS
from agon_env.seeding import derive_seed
from agon_env.vocabulary import CHALLENGER, DRAFTER

__all__ = ["NonFiniteWeights", "OnPolicyError", "TaskScoreError", "Trainer"]


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, MiB (Linux reports KiB, macOS bytes)."""
    import resource  # POSIX only: imported here so the module still imports elsewhere
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def _rate_at_step(scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    """Set the optimiser's rate to what this run's schedule gives at the restored step: the rate
    saved with it, unless ``--extend`` gave the run a longer schedule (whose rate there is higher:
    the saved one would train the extension at the old schedule's end, 0 for a linear decay)."""
    groups = scheduler.optimizer.param_groups
    for group, base, f in zip(groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
        group["lr"] = base * f(scheduler.last_epoch)
    scheduler._last_lr = [g["lr"] for g in groups]


@dataclass
class Trainer:
    run: ResolvedRun
    """The run as resolved once (:mod:`agon_env.resolved`); the trainer derives none of it."""
    plugin: AlgorithmPlugin
    env: TaskEnv
    base: SharedBase
    backend: Backend
    agents: dict[str, Agent]
    optimizers: dict[str, torch.optim.Optimizer]
    schedulers: dict[str, torch.optim.lr_scheduler.LambdaLR]
    sampler: ProblemSampler
    update: Update
    """The GRPO update of each adapter (:mod:`agon_env.algorithms.update`)."""
    ctx: DistContext = field(default_factory=DistContext)
    step: int = 0
    samples: list[JSONRecord] = field(default_factory=list)
    """The last step's prompts and completions (:func:`~agon_env.algorithms.metrics.rendered_samples`)."""
    trained_config: JSONRecord | None = None
    """The config the restored checkpoint was trained with (None: fresh, or an older checkpoint)."""
    scoring: ScoringWatch = field(init=False)
    """Stops the run once the task cannot judge its answers (built from the env's task)."""
    rolled_back: bool = False
    """This step rolled back the last step's update (a collapse, :mod:`.blowup`) and replayed its
    rollout: a checkpoint saved since holds the blown-up weights and is to be written again."""
    on_rollback: Callable[[int, list[str]], None] | None = None
    """Told ``(the step whose update was undone, the adapters rolled back)`` while the live weights
    are the ones restored: what the run writes again where it saved the blown-up ones (a snapshot
    of that step)."""

    def __post_init__(self) -> None:
        self.scoring = ScoringWatch(self.env.task)

    # -- construction ---------------------------------------------------------------------

    @property
    def cfg(self) -> TrainConfig:
        """The run's config, for the settings it does not derive (``grpo``, ``optim``, ...)."""
        return self.run.config

    @classmethod
    def build(cls, run: ResolvedRun, ctx: DistContext | None = None) -> Trainer:
        """The trainer of ``run``, a config resolved once
        (:func:`~agon_env.algorithms.validation.resolve`: ``Trainer.build(resolve(cfg))``)."""
        cfg = run.config
        ctx = ctx or DistContext(device=run.device)
        dist.check_batch(cfg.batch_problems, ctx)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        plugin = get_algorithm(run.algo).mirrored(cfg.first_drafter)
        env = build_env(run)
        base = build_base(run)
        backend = BACKENDS[cfg.model.backend](run, base, run.device, False)
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
        update = Update(base, cfg.grpo, cfg.sampling.max_new_tokens, cfg.model.max_seq_len, ctx)
        return cls(run, plugin, env, base, backend, agents, optimizers, schedulers, sampler, update, ctx)

    @property
    def counters(self) -> dict[str, float]:
        """``nan_skipped``, ``updates`` and ``blowups`` so far (checkpointed)."""
        return self.update.counters

    @property
    def identity(self) -> RunIdentity:
        m = self.cfg.model
        return RunIdentity(m.name, tuple(self.plugin.adapters), m.lora_r, m.lora_alpha)

    # -- checkpoints ---------------------------------------------------------------------

    def check_finite(self) -> None:
        """Refuse to write adapters holding inf or NaN (the update rolls such steps back, so this
        is the last guard: a NaN adapter is never saved)."""
        for name in self.plugin.adapters:
            if not all_finite(list(self.base.parameters(name))):
                raise NonFiniteWeights(
                    f"step {self.step}: {name}'s weights are not finite; not saved (the last checkpoint "
                    "stays): lower --optim.lr or check the model's dtype"
                )

    def save(self, run_dir: Path) -> None:
        self.check_finite()
        save_checkpoint(
            run_dir,
            step=self.step,
            identity=self.identity,
            adapters={n: self.base.adapter_state_dict(n) for n in self.plugin.adapters},
            optimizers=self.optimizers,
            schedulers=self.schedulers,
            sampler=self.sampler.state_dict(),
            counters=dict(self.counters),
            config=to_dict(self.cfg),
        )

    def restore(self, run_dir: Path, held: Callable[[JSONRecord | None], None] | None = None) -> None:
        """Continue from the checkpoint in ``run_dir``; ``held`` first judges the config it trained
        with (a ``config.yaml`` edited since is refused by field, before any state loads: an edited
        ``seed`` or ``env.kwargs`` would otherwise fail in the sampler, naming no field)."""
        state = load_checkpoint(run_dir, self.identity)
        self.trained_config = state.get("config")
        if held is not None:
            held(self.trained_config)
        for name in self.plugin.adapters:
            self.base.load_adapter_state_dict(name, state["adapters"][name])
            self.optimizers[name].load_state_dict(state["optimizers"][name])
            self.schedulers[name].load_state_dict(state["schedulers"][name])
            _rate_at_step(self.schedulers[name])
        self.sampler.load_state_dict(state["sampler"])
        self.counters.update(state["counters"])
        self.step = int(state["step"])
        set_rng_state(state["rng"])
        self._sync(self.plugin.adapters)

    def _sync(self, adapters: Sequence[str]) -> None:
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
        batch, local = self._watched_rollout(seats)
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
        self.scoring.check(batch, self.step, self.ctx)
        return batch, {**self._divergence_kl(batch, seats), **latent_figures(batch.turns)}

    def _watched_rollout(self, seats: dict[str, str]) -> tuple[RolloutBatch, dict[str, float]]:
        """:meth:`_rollout`, judged for a collapse the last update caused (:mod:`.blowup`): such an
        update is rolled back and the rollout replayed on the weights from before it. Then the
        weights this step's update starts from are kept, for the next step to roll back to."""
        self.rolled_back = False
        watch = self.update.watch
        batch, local = self._rollout(seats)
        now = self._unusable(batch)
        blown = watch.collapsed(now)
        if blown:
            for name in blown:
                restore(list(self.base.parameters(name)), self.optimizers[name], watch.saved[name])
            self._sync(list(blown))
            self.rolled_back = True
            if self.on_rollback is not None:
                self.on_rollback(self.step, sorted(blown))
            for name, what in blown.items():
                msg = f"step {self.step}: {name}: {what}; its last update rolled back"
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                watch.blew_up(name, self.step, what)
            batch, local = self._rollout(seats)
            now = self._unusable(batch)
        watch.before.update(now)  # a collapsed rollout's counts are never a stream's past
        trained = set(self.plugin.updates(self.step).values())
        watch.saved = {n: snapshot(list(self.base.parameters(n)), self.optimizers[n]) for n in trained}
        return batch, local

    def _unusable(self, batch: RolloutBatch) -> dict[tuple[str, str], tuple[int, int]]:
        """Per ``(adapter, role)`` over all ranks: (empty or unparsable completions, completions)."""
        adapter_of = {seat: getattr(agent, "adapter", None) or seat for seat, agent in self.agents.items()}
        counts = unusable_counts(batch.turns, adapter_of)
        # The same keys on every rank, in one order: the step's seats, whoever played what here.
        keys = sorted({(adapter_of.get(s, s), r) for r, s in self.plugin.seats(self.step).items()})
        flat = dist.all_sum([float(x) for k in keys for x in counts.get(k, (0, 0))], self.ctx)
        return {k: (int(flat[2 * i]), int(flat[2 * i + 1])) for i, k in enumerate(keys) if flat[2 * i + 1]}

    def _streams(self, batch: RolloutBatch, local: dict[str, float]) -> dict[str, list[StreamBatch]]:
        """Each trained role's kept groups, keyed by the adapter they update."""
        streams: dict[str, list[StreamBatch]] = defaultdict(list)
        kept = total = 0
        for role, adapter in self.plugin.updates(self.step).items():
            sb, keep = self.update.stream(batch, role)
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
            stats = self.update.apply(
                name,
                streams.get(name, []),
                self.optimizers[name],
                step=self.step,
                version=getattr(self.backend, "versions", {}).get(name),
                scale=1.0 / max(1, trained.count(name)),
            )
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
            rival = self.update.logprobs(turns, sampled_temperature(turns))
        mask = completion_mask([t.completion.completion_ids for t in turns]).to(rival.device)
        kl = k3_kl(own.to(rival.device), rival)  # k3: unbiased and never negative, unlike the plain log-ratio
        return {M.KL: float((kl * mask).sum() / mask.sum().clamp(min=1))}
