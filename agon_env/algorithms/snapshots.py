"""Snapshots: each adapter's LoRA weights kept at every K-th step (``--snapshot-every K``).

A run otherwise keeps only its latest adapters, so whether ``agent_a`` at step 30 beats itself
at step 10 could never be asked after the fact; ``agon league`` plays the snapshots against
each other. Each is a peft folder (:meth:`~agon_env.agents.adapters.SharedBase.save`, written
atomically) at :meth:`~agon_env.run_folder.RunFolder.snapshot`. A snapshot is written *before*
its step's checkpoint: a run killed between the two resumes from an earlier checkpoint and
writes the same snapshot again (a step repeats exactly on resume), so none is ever missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agon_env.agents.adapters import SharedBase
from agon_env.run_folder import RunFolder


def snapshot_due(every: int, step: int) -> bool:
    """Whether the weights after ``step`` steps are kept (``every`` = 0: never)."""
    return every > 0 and step > 0 and step % every == 0


def save_snapshots(base: SharedBase, adapters: Sequence[str], run_dir: Path, step: int) -> None:
    """Write each of ``adapters`` as it is now, the weights after ``step`` steps."""
    folder = RunFolder(run_dir)
    for name in adapters:
        base.save(name, folder.snapshot(step, name))


def resave_rolled_back(base: SharedBase, adapters: Sequence[str], run_dir: Path, step: int) -> None:
    """Write again the snapshots of ``step`` that hold an update a later collapse rolled back
    (:attr:`~agon_env.algorithms.trainer.Trainer.on_rollback`), with the weights restored: the
    ones the run went on from. Adapters with no snapshot of that step are left alone."""
    folder = RunFolder(run_dir)
    written = set(folder.snapshot_adapters(step))
    save_snapshots(base, [name for name in adapters if name in written], run_dir, step)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def snapshot_summary(run_dir: Path) -> str | None:
    """One line for the run's summary: how many snapshots the folder keeps, of which steps, and
    their size on disk (None when it keeps none)."""
    folder = RunFolder(run_dir)
    steps = folder.snapshot_steps()
    if not steps:
        return None
    kept = [folder.snapshot(s, name) for s in steps for name in folder.snapshot_adapters(s)]
    total = sum(map(_size, kept))
    return (
        f"snapshots: {len(kept)} ({len(steps)} steps: {', '.join(map(str, steps))}), "
        f"{total / len(kept) / 2**20:.2f} MiB each, {total / 2**20:.1f} MiB in all, in {folder.snapshots}"
    )
