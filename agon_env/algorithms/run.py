"""The run around the trainer: process group, run folder, step loop, budget, final writes.

:func:`train` is what ``agon train`` calls, in every process a launcher starts. It joins
the process group (a no-op alone), refuses or resumes the run folder, steps the
:class:`~agon_env.algorithms.trainer.Trainer` until ``steps`` or the time budget, and has
rank 0 write metrics, checkpoints, adapters, the plot and the summary table.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from agon_env import metric_names as M
from agon_env.agents.prompts import role_prompts
from agon_env.algorithms import distributed as dist
from agon_env.algorithms.blowup import BlowUp
from agon_env.algorithms.checkpoint import checkpoint_step, prepare_run_dir
from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.learning import LearningWatch
from agon_env.algorithms.resume import check_held, check_resume, schedule_change
from agon_env.algorithms.run_log import MetricsLogger, plot, print_summary
from agon_env.algorithms.snapshots import resave_rolled_back, save_snapshots, snapshot_due, snapshot_summary
from agon_env.algorithms.trainer import Trainer
from agon_env.config import TrainConfig, to_dict
from agon_env.memory import check_fits
from agon_env.resolved import ResolvedRun
from agon_env.run_folder import RunFolder, write_resolved

__all__ = ["train"]

log = logging.getLogger(__name__)


def _fits(budget_s: float, started: float, step_times: list[float], reserve_s: float = 0.0) -> bool:
    """Whether one more step (as long as the slowest of the last three) ends within the budget,
    leaving ``reserve_s`` for the work after the last step."""
    if not budget_s or not step_times:
        return True
    return time.perf_counter() - started + max(step_times[-3:]) + reserve_s <= budget_s


MIN_HELDOUT = 10
"""Fewer held-out problems than this say nothing (±0.3 at 95 %): the check is skipped instead."""


def _heldout_fit(problems: int, reserve_s: float, left_s: float) -> int:
    """How many of the ``problems`` the adapters can still answer in the ``left_s`` seconds left."""
    if reserve_s <= 0:
        return problems
    return min(problems, max(0, int(left_s / (reserve_s / problems))))


def train(run: ResolvedRun) -> Path:
    """Run (or resume) a training run; return its folder. ``run`` is a config resolved once
    (:func:`~agon_env.algorithms.validation.resolve`: ``train(resolve(cfg))``, the checks the
    command line's get); nothing below resolves it again.

    Launched by ``torchrun`` (or ``accelerate launch --multi_gpu``), every process runs this same
    function: they join one process group, share the step's problems, and rank 0 alone
    writes the run folder.
    """
    started = time.perf_counter()
    ctx = dist.init_from_env(run.device)
    try:
        return _train(run, ctx, started)
    finally:
        dist.shutdown(ctx)


def _train(run: ResolvedRun, ctx: DistContext, started: float) -> Path:
    cfg = run.config
    run_dir = cfg.run_dir
    check_fits(cfg)  # a step that cannot fit in memory: refused with the estimate, before any folder
    # Every rank checks before rank 0 creates, so a refused folder fails all ranks alike.
    prepare_run_dir(run_dir, cfg.resume, create=False)
    # A resumed run is the folder's own: a changed config is refused before any model loads.
    resume = check_resume(cfg) if cfg.resume else None
    # Built before the folder exists: a wrong model, env id, task keyword or a batch that
    # does not split over the processes leaves nothing behind, so a fixed rerun is not refused.
    trainer = Trainer.build(run, ctx)
    if ctx.is_main:  # a snapshot of a step whose update a collapse undid is written again
        trainer.on_rollback = lambda step, names: resave_rolled_back(trainer.base, names, run_dir, step)
    dist.barrier(ctx)
    fresh = resume is None or resume.restart
    if ctx.is_main:
        if resume is not None and resume.restart:
            # Killed before its first checkpoint: what the folder holds is that start's, redone.
            print(f"agon train: {run_dir} has no checkpoint yet: starting it again from step 0")
            shutil.rmtree(run_dir)
        prepare_run_dir(run_dir, resume=not fresh)
    try:
        if not fresh:
            extended_from = resume.extended_from if resume is not None else None
            # Refuses an incompatible checkpoint, and a hand-edited config.yaml, before any step.
            trainer.restore(run_dir, held=lambda trained: check_held(cfg, trained, extended_from is not None))
            if extended_from is not None and ctx.is_main:
                print(f"agon train: {schedule_change(cfg, extended_from, trainer.step)}")
                write_resolved(run_dir, run)  # the folder's config now says the new total
                trainer.save(run_dir)  # and so does its checkpoint (check_held reads it)
        elif ctx.is_main:
            write_resolved(run_dir, run)
        return _loop(cfg, ctx, trainer, run_dir, started)
    except BaseException:
        if fresh and trainer.step == 0 and ctx.is_main:
            # Failed before its first step: the folder holds nothing worth resuming, and
            # leaving it would make the corrected command refuse ("already exists").
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _loop(cfg: TrainConfig, ctx: DistContext, trainer: Trainer, run_dir: Path, started: float) -> Path:
    logger = (
        MetricsLogger(run_dir, cfg.steps, trainer.step, cfg.progress, cfg.report_to, to_dict(cfg))
        if ctx.is_main
        else None
    )
    step_times: list[float] = []
    watch = LearningWatch(cfg.not_learning_steps, cfg.batch_problems)
    check = _heldout_check(cfg, trainer, run_dir) if ctx.is_main and cfg.heldout_problems else None
    # With a budget the base's half of the held-out check runs first: its time is the reserve.
    skipped = check.measure_base() if check is not None and cfg.time_budget_min else None
    reserve = check.reserve() if check is not None else 0.0
    try:
        while trainer.step < cfg.steps:
            if not dist.agree(_fits(cfg.time_budget_min * 60, started, step_times, reserve), ctx):
                if ctx.is_main:
                    log.warning(
                        "time budget of %.1f min reached after step %d", cfg.time_budget_min, trainer.step
                    )
                    print(f"agon train: stopping at step {trainer.step}/{cfg.steps}: time budget reached")
                    trainer.save(run_dir)
                break
            step = trainer.step
            metrics = _watched_step(trainer, run_dir, ctx)
            step_times.append(metrics[M.TIME_STEP])
            if logger is not None:
                logger.log(step, metrics, trainer.samples)
            warning = watch.update(metrics)  # the metrics are every rank's: all ranks agree
            if warning and logger is not None:
                logger.warn(step, warning)
            stop = bool(warning) and cfg.stop_if_not_learning
            if ctx.is_main and snapshot_due(cfg.snapshot_every, trainer.step):
                trainer.check_finite()  # before its checkpoint: a kill between them repeats the step
                save_snapshots(trainer.base, trainer.plugin.adapters, run_dir, trainer.step)
            due = trainer.step % cfg.save_every == 0 or trainer.step == cfg.steps or stop
            if ctx.is_main and (due or trainer.rolled_back):  # rolled back: the checkpoint held the blow-up
                trainer.save(run_dir)
            if stop:
                if ctx.is_main:
                    print(f"agon train: stopping at step {trainer.step}/{cfg.steps}: not learning")
                break
    finally:
        if logger is not None:
            logger.close()
    if ctx.is_main:
        trainer.check_finite()
        for name in trainer.plugin.adapters:
            trainer.base.save(name, RunFolder(run_dir).adapter(name))
        plot(run_dir)
        idle = watch.at_end(trainer.counters.get("updates", 0))
        notes = [idle] if idle else [watch.warning] if watch.warning else []
        print_summary(run_dir, notes=notes)
        kept = snapshot_summary(run_dir)
        if kept:
            print(f"agon train: {kept}")
        if idle and idle != watch.warning:
            print(f"agon train: {idle}")
        if skipped:
            print(f"agon train: held-out check skipped: {skipped}")
        elif check is not None:
            left = cfg.time_budget_min * 60 - (time.perf_counter() - started)
            problems = _heldout_fit(check.planned, reserve, left)
            if problems >= min(MIN_HELDOUT, check.planned):
                check.finish(problems)
            else:
                print(
                    f"agon train: held-out check skipped: {max(0.0, left):.0f} s of the time budget left, "
                    f"too few for {min(MIN_HELDOUT, check.planned)} problems; "
                    f"run it later with: agon eval {run_dir} "
                    f"--methods {'base-few-shot' if cfg.prompts.few_shot else 'base-zero-shot'} standalone "
                    f"--val-problems 0 --problems {cfg.heldout_problems}"
                )
    dist.barrier(ctx)  # nobody leaves (and tears the group down) before rank 0 has written
    return run_dir


def _watched_step(trainer: Trainer, run_dir: Path, ctx: DistContext) -> dict[str, float]:
    """One step; a second blow-up in a row stops the run (:mod:`.blowup`), and when the checkpoint
    was saved after the update it rolled back, the checkpoint is first written again without it:
    the weights of a blown-up update are never left saved."""
    try:
        return trainer.train_step()
    except BlowUp:
        if ctx.is_main and trainer.rolled_back and checkpoint_step(run_dir) == trainer.step:
            trainer.save(run_dir)
        raise


def _heldout_check(cfg: TrainConfig, trainer: Trainer, run_dir: Path) -> Any:
    """The run's held-out check (:class:`agon_env.evaluation.heldout.TrainedRunCheck`), the one
    thing a run calls in the evaluator (which itself knows no algorithm): agents over the
    trainer's own base and backend, the run's prompts, each policy sampling as the run
    resolved it (an adapter at its own temperature, the base at the run's), as ``agon eval``
    builds them."""
    from agon_env.agents import LLMAgent
    from agon_env.evaluation.heldout import TrainedRunCheck

    prompts = role_prompts(trainer.env.task, cfg.prompts)

    def agent(name: str, adapter: str) -> LLMAgent:
        return LLMAgent(
            name=name,
            base=trainer.base,
            adapter=adapter,
            backend=trainer.backend,
            sampling=trainer.run.policy_sampling(adapter),
            prompts=prompts,
            template_kwargs=cfg.model.chat_template_kwargs,
        )

    adapters = tuple(trainer.plugin.adapters)
    return TrainedRunCheck(
        run_dir,
        cfg.env.id,
        cfg.env.kwargs,
        agent,
        adapters,
        cfg.heldout_problems,
        env_options=trainer.run.reader_options(),
    )
