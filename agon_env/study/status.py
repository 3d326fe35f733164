"""``agon study status DIR``: where each unit of a study stands, read from the study folder alone.

Nothing here talks to the process that runs the study: a unit's state is what its files say, so
the command works while ``agon study run`` (or a Ray cluster sharing the folder) is at work, after
it was killed, and after it finished.

- **done**: its ``eval/UNIT/eval.json`` exists (what ``run`` itself checks);
- **failed**: the last run listed it in ``failed.json`` (with its log's last line);
- **running at step k of n** / **evaluating**: its lock (``locks/UNIT/.lock``, which names the pid
  of its holder) is held by a live process; ``k`` is the rows of its run's ``metrics.jsonl``, and a
  unit with every step logged is evaluating. A pid is only checked on this machine: a unit that a
  Ray worker on another node runs shows as *stopped* there;
- **stopped at step k of n**: begun, not running now (the next ``run`` resumes it);
- **waiting**: nothing written yet.

A unit's time is from its lock's last acquisition to its ``unit.json`` (a resumed unit counts its
last part only). A trained unit's cost is its steps times the turns its plugin's episodes play
(:func:`~agon_env.study.plan.episode_turns`: an agon unit costs about twice a grpo one, and runs
3–4× as long, its challenger reading the draft too); the estimate of what is left is the finished
trained units' seconds per unit of cost times the cost left (waiting units, and the steps running
ones still have), divided by the units running now.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agon_env.run_folder import RunFolder
from agon_env.study.folder import StudyFolder
from agon_env.study.plan import StudyPlan, episode_turns, load, unit_name
from agon_env.study.units import Lock, read_unit, trained


@dataclass
class UnitState:
    """One unit as its files show it."""

    name: str
    state: str
    """``waiting``, ``running``, ``evaluating``, ``stopped``, ``failed`` or ``done``."""
    step: int = 0
    steps: int = 0
    """Training steps logged and planned (0 planned: the base, which only evaluates)."""
    turns: int = 1
    """Turns per training episode (:func:`~agon_env.study.plan.episode_turns`)."""
    seconds: float | None = None
    """A done unit's time (its last part, when it was resumed)."""
    last_line: str = ""
    """A failed unit's log's last line."""

    @property
    def cost(self) -> int:
        """What training the unit costs, in step-turns: its time grows with both."""
        return self.steps * self.turns

    def describe(self) -> str:
        at = f" at step {self.step} of {self.steps}" if self.steps else ""
        return {
            "waiting": "waiting",
            "running": f"running{at}",
            "evaluating": "evaluating",
            "stopped": f"stopped{at} (the next run resumes it)",
            "failed": f"failed: {self.last_line}",
            "done": f"done in {self.seconds:.0f} s" if self.seconds is not None else "done",
        }[self.state]


def _holder(study: Path, name: str) -> int | None:
    """The pid holding unit ``name``'s lock when it is a live process here, else None."""
    path = Lock(StudyFolder(study).lock(name)).path
    try:
        pid = int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, someone else's
        return pid
    return pid


def logged_steps(run_dir: Path) -> int:
    """Rows in a run's ``metrics.jsonl`` (one per finished step)."""
    path = RunFolder(run_dir).metrics
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.is_file() else 0


def resume_step(run_dir: Path) -> int | None:
    """The step a unit's run resumes from (None: it starts afresh)."""
    return logged_steps(run_dir) if RunFolder(run_dir).checkpoint.is_file() else None


def resume_note(spec: Path) -> str:
    """What the console adds to a unit's "started": that it only evaluates (its run finished
    training before, as its child will find), or from which step it resumes, if it does."""
    unit = read_unit(spec) if spec.is_file() else None
    run_dir = Path(unit.run_dir) if unit is not None and unit.run_dir else None
    if unit is None or run_dir is None:
        return ""
    if trained(run_dir, unit.steps):
        return " (trained already: evaluating only)"
    step = resume_step(run_dir)
    return "" if step is None else f" (resuming from step {step}, its last checkpoint)"


def unit_names(plan: StudyPlan) -> list[tuple[str, int, int]]:
    """Every unit of ``plan`` as ``run`` orders them, with its planned training steps and the turns
    of its episodes."""
    names = [("base", 0, 1)] if plan.evaluation.base_methods else []
    for seed in plan.seeds:
        for arm in plan.arms:
            cfg = plan.unit_config(arm, seed)
            names.append((unit_name(arm, seed), cfg.steps, episode_turns(cfg.algo)))
    return names


def unit_state(study: Path, name: str, steps: int, failed: dict[str, str], turns: int = 1) -> UnitState:
    folder = StudyFolder(study)
    run_dir = folder.run(name).path
    step = logged_steps(run_dir) if steps else 0
    if folder.eval_report(name).is_file():
        lock, stamp = Lock(folder.lock(name)).path, folder.unit_record(name)
        seconds = stamp.stat().st_mtime - lock.stat().st_mtime if lock.is_file() and stamp.is_file() else None
        return UnitState(name, "done", step, steps, turns, seconds)
    if _holder(study, name) is not None:
        return UnitState(name, "evaluating" if step >= steps else "running", step, steps, turns)
    if name in failed:
        return UnitState(name, "failed", step, steps, turns, last_line=failed[name])
    begun = folder.log(name).is_file() or run_dir.exists()
    return UnitState(name, "stopped" if begun else "waiting", step, steps, turns)


def states(study: Path) -> list[UnitState]:
    """Every unit of the study in ``study`` (a folder ``agon study run`` made)."""
    folder = StudyFolder(study).require()
    plan = load(folder.plan)
    failed = folder.read_failed()
    return [unit_state(study, name, steps, failed, turns) for name, steps, turns in unit_names(plan)]


def remaining(units: list[UnitState]) -> float | None:
    """Seconds left, estimated from the finished trained units' seconds per unit of cost
    (:attr:`UnitState.cost`; None: none finished yet)."""
    done = [u for u in units if u.state == "done" and u.steps and u.seconds is not None]
    if not done:
        return None
    rate = sum(u.seconds or 0.0 for u in done) / sum(u.cost for u in done)
    work = sum(
        u.cost * (1 if u.state in ("waiting", "failed") else 1 - u.step / u.steps)  # a stopped unit resumes
        for u in units
        if u.steps and u.state not in ("done", "evaluating")
    )
    running = sum(u.state in ("running", "evaluating") for u in units)
    return rate * work / max(1, running)


def render(study: Path, units: list[UnitState], now: float | None = None) -> str:
    """The status as printed: one line for the study, one per unit."""
    now = time.time() if now is None else now
    counts = {s: sum(u.state == s for u in units) for s in ("done", "running", "evaluating", "failed")}
    folder = StudyFolder(study)
    started = folder.read_start()
    so_far = ""
    if started is not None:
        t0 = datetime.fromisoformat(started.started_at.replace("Z", "+00:00"))
        ends = [folder.unit_record(u.name).stat().st_mtime for u in units if u.state == "done"]
        active = any(u.state in ("running", "evaluating") for u in units)
        end = now if active or not ends else max(ends)
        so_far = f"; {end - t0.timestamp():.0f} s since it started"
    left = remaining(units)
    estimate = (
        "nothing left"
        if counts["done"] == len(units)
        else f"about {left:.0f} s left (from {sum(u.state == 'done' and bool(u.steps) for u in units)} "
        "finished units)"
        if left is not None
        else "no estimate yet (no trained unit finished)"
    )
    head = (
        f"{study}: {counts['done']} of {len(units)} units done, "
        f"{counts['running'] + counts['evaluating']} running, {counts['failed']} failed{so_far}; {estimate}"
    )
    width = max(len(u.name) for u in units)
    return "\n".join([head, *(f"  {u.name:<{width}}  {u.describe()}" for u in units)])
