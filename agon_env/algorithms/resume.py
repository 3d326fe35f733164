"""What ``--resume`` continues: the run folder's own run, as its ``config.yaml`` says.

A run folder owns its config. ``agon train --resume --out-dir D`` with no other flag
continues D exactly as configured (the command line starts from D's config, not from the
defaults: :func:`stored_base`). A flag that changes what the run *is* -- model, env, task
keywords, algorithm, seed, learning rate, schedule, sizes, sampling -- is refused in one line
naming each field and both values; the keys of :data:`agon_env.config.HOW_IT_RUNS` (what a
run shows, its budget, its memory chunks) may change. More ``steps`` is an explicit
operation, ``--extend``, whose new learning-rate schedule is stated when the run resumes.

``config.yaml`` is held to the run too: every checkpoint records the config it was trained
with, and a resumed run whose ``config.yaml`` was edited by hand since (``steps``, ``optim.lr``)
is refused like a changed flag, naming each field (:func:`check_held`, after the checkpoint
loads). ``--extend`` rewrites both at once.

The flag checks run before any model loads. A folder killed before its first checkpoint
has nothing to resume: ``--resume`` starts it again from step 0 (the folder holds only what
that start wrote, which it rewrites).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from agon_env.algorithms.schedules import lr_lambda
from agon_env.config import HOW_IT_RUNS, ConfigError, TrainConfig, differences, from_dict
from agon_env.json_value import JSONValue
from agon_env.run_folder import RunFolder, RunFolderError, load_run_config


@dataclass(frozen=True)
class Resume:
    """What a ``--resume`` will do, decided before any model loads."""

    stored: TrainConfig | None
    """The folder's config (``None``: the folder has no config yet)."""
    restart: bool
    """No checkpoint yet: the run starts again from step 0 in the same folder."""
    extended_from: int | None = None
    """The folder's ``steps`` when ``--extend`` raises them, else ``None``."""


def stored_base(run_dir: Path) -> TrainConfig | None:
    """The config the command line starts from with ``--resume``: the folder's own, when it has one."""
    folder = RunFolder(run_dir)
    if not folder.config.is_file():
        return None
    return replace(load_run_config(run_dir), resume=True)


def check_resume(cfg: TrainConfig) -> Resume:
    """Refuse a resume that would change what the run is; else say what resuming will do."""
    folder = RunFolder(cfg.run_dir)
    if not folder.config.is_file():
        if folder.path.is_dir() and not any(folder.path.iterdir()):
            return Resume(None, restart=True)  # created, then killed before it wrote anything
        raise RunFolderError(
            f"--resume: {folder.path} holds no config.yaml, so it is no run folder of agon train; "
            "drop --resume and choose a new --out-dir"
        )
    stored = load_run_config(folder.path)
    changed = [(k, a, b) for k, a, b in differences(stored, cfg) if k not in HOW_IT_RUNS]
    extended_from = None
    if cfg.extend:
        steps = [(k, a, b) for k, a, b in changed if k == "steps"]
        if steps and steps[0][2] > steps[0][1]:
            extended_from = int(steps[0][1])
            changed = [c for c in changed if c[0] != "steps"]
    if changed:
        said = "; ".join(f"{k} is {a!r} there but {b!r} here" for k, a, b in changed)
        more = (
            " (more steps for a finished run: add --extend)"
            if [k for k, _, _ in changed] == ["steps"] and cfg.steps > stored.steps
            else ""
        )
        raise ConfigError(
            f"--resume: {folder.path} is its own run: {said}. Drop those flags to continue it as "
            f"configured{more}, or start a new run under another --out-dir"
        )
    restart = not folder.checkpoint.exists()
    return Resume(stored, restart=restart, extended_from=extended_from)


def check_held(cfg: TrainConfig, trained: Mapping[str, JSONValue] | None, extended: bool) -> None:
    """Refuse a resume whose ``config.yaml`` differs from the config its checkpoint trained with
    (``trained``; None: a checkpoint older than the record, not checked) on what the run *is*:
    it was edited by hand, and the run would train on settings it never had, silently."""
    if trained is None:
        return
    held = from_dict(trained)
    allowed = HOW_IT_RUNS | ({"steps"} if extended else set())
    changed = [(k, a, b) for k, a, b in differences(held, cfg) if k not in allowed]
    if changed:
        config = RunFolder(cfg.run_dir).config
        said = "; ".join(f"{k} is {a!r} in its checkpoint but {b!r} now" for k, a, b in changed)
        raise ConfigError(
            f"--resume: {config} was edited by hand since the run's last checkpoint: {said}. Put it back "
            "(more steps: --steps N --extend), or start a new run under another --out-dir"
        )


def schedule_change(cfg: TrainConfig, old_steps: int, step: int) -> str:
    """One line stating what ``--extend`` does to the learning rate at ``step``."""
    o = cfg.optim
    before = o.lr * lr_lambda(old_steps, o.warmup_ratio, o.schedule)(step)
    after = o.lr * lr_lambda(cfg.steps, o.warmup_ratio, o.schedule)(step)
    return (
        f"extending the run from {old_steps} to {cfg.steps} steps at step {step}: the {o.schedule} "
        f"schedule is now the one {cfg.steps} steps give, so the learning rate there is {after:.3g} "
        f"(it was {before:.3g})"
    )
