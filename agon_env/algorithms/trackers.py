"""Experiment trackers, ``--report-to``: where a run's scalars, config and samples go besides the run folder.

``metrics.jsonl`` and ``samples.jsonl`` are the record of truth and are always written
(:class:`~agon_env.algorithms.run_log.MetricsLogger`); each tracker named in
``TrainConfig.report_to`` gets the same thing as it happens, as TRL, verl and OpenRLHF runs
report it: the resolved config once, then per step every finite scalar of ``metrics.jsonl``
under the same name, at the same step, and a table of that step's samples.

==============  ============================================================================
name            where it goes
==============  ============================================================================
``tensorboard`` ``<run>/tb`` (the default): scalars, each sample as text, the config as text
``wandb``       a Weights & Biases run named after the run folder, its files in ``$WANDB_DIR``, else
                ``<run>/wandb`` (project ``$WANDB_PROJECT``, else ``agon-env``; ``WANDB_MODE=offline``
                keeps it local); its id is kept in ``<run>/wandb-run-id.txt``
``trackio``     a trackio run named ``<folder>-<6 hex>``, in ``$TRACKIO_DIR`` (else the HF cache;
                project ``$TRACKIO_PROJECT``, else ``agon-env``; ``trackio show`` reads it); its
                name is kept in ``<run>/trackio-run-name.txt``
``none``        no tracker: the run folder only
==============  ============================================================================

**Resume.** A resumed run (``--resume``, also after ``kill -9``) continues the *same* tracker
run -- wandb's id, trackio's name -- and first hands each tracker the steps of ``metrics.jsonl``
before the resume step that it does not hold (:meth:`Tracker.catch_up`): a step logged just
before a kill may never have left the process (wandb and trackio send from a background
thread), so without it a resumed run's tracker lost steps that ``metrics.jsonl`` keeps. The
steps from the resume step on are trained again, so trackio's rows of them are dropped first
(as TensorBoard purges its events): each step is one row, the resumed run's.

wandb and trackio are optional (``pip install 'agon-env[track]'``) and imported only when
named; :func:`refusal` is the config check that turns a missing one away in one line before
any model loads. A new tracker is one class with ``log`` and ``close`` and one row of
:data:`TRACKERS`.
"""

from __future__ import annotations

import importlib.util
import math
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from agon_env.algorithms.errors import TrackerError
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import RunFolder
from agon_env.vocabulary import CHALLENGER, DRAFTER

NONE = "none"
"""``--report-to none``: no tracker at all."""
PROJECT = "agon-env"
"""The wandb / trackio project when ``$WANDB_PROJECT`` / ``$TRACKIO_PROJECT`` is not set."""


class Tracker(Protocol):
    def log(
        self, step: int, scalars: Mapping[str, float], samples: Sequence[Mapping[str, JSONValue]]
    ) -> None:
        """One step: its finite scalars and its rendered samples (possibly none)."""

    def warn(self, step: int, text: str) -> None:
        """A warning about the run (it is not learning), where the tracker shows text."""

    def catch_up(self, records: Sequence[Mapping[str, JSONValue]]) -> None:
        """On resume: ``metrics.jsonl``'s records before the resume step; log those it lacks."""

    def close(self) -> None: ...


SAMPLE_COLUMNS = (
    "step",
    "episode",
    "problem",
    "drafter",
    "draft summary",
    "draft answer",
    "draft correct",
    "draft reward",
    "challenger",
    "shown to challenger",
    "challenge answer",
    "challenge correct",
    "challenge reward",
)
"""The samples table: one row per episode sampled, its draft and its challenge side by side."""


def sample_rows(step: int, samples: Sequence[Mapping[str, JSONValue]]) -> list[list[JSONValue]]:
    """The :data:`SAMPLE_COLUMNS` rows of one step's samples (turns of
    :func:`~agon_env.algorithms.metrics.rendered_samples`), one per episode, in episode order;
    a mode without a challenge leaves its columns empty."""
    episodes: dict[JSONValue, dict[str, Mapping[str, JSONValue]]] = {}
    for i, s in enumerate(samples):
        episodes.setdefault(s.get("episode", f"turn {i}"), {})[str(s.get("role"))] = s
    rows = []
    for episode, turns in episodes.items():
        d, c = turns.get(DRAFTER, {}), turns.get(CHALLENGER, {})
        problem = d.get("problem", c.get("problem", ""))
        rows.append(
            [
                step,
                episode,
                problem,
                d.get("seat", ""),
                d.get("summary") or "",
                d.get("answer") or "",
                d.get("correct", ""),
                d.get("reward", ""),
                c.get("seat", ""),
                c.get("shown", ""),
                c.get("answer") or "",
                c.get("correct", ""),
                c.get("reward", ""),
            ]
        )
    return rows


def finite_scalars(metrics: Mapping[str, JSONValue], drop: Sequence[str] = ()) -> dict[str, float]:
    """The metrics a tracker plots: the numbers of ``metrics.jsonl`` that are not null there
    (less the keys ``drop``: a record's own ``step``)."""
    return {
        k: v
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and k not in drop
    }


class TensorBoard:
    """``<run>/tb``: scalars, each sample as markdown text (``samples/<role>``), the config."""

    def __init__(self, run_dir: Path, config: Mapping[str, JSONValue], start_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(
            str(RunFolder(run_dir).tensorboard), purge_step=start_step if start_step else None
        )
        if config:
            self.writer.add_text("config", _yaml_block(config), start_step)

    def log(
        self, step: int, scalars: Mapping[str, float], samples: Sequence[Mapping[str, JSONValue]]
    ) -> None:
        for s in samples:
            self.writer.add_text(f"samples/{s['role']}", _markdown(s), step)
        for k, v in scalars.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def warn(self, step: int, text: str) -> None:
        self.writer.add_text("warnings", f"**step {step}**: {text}", step)
        self.writer.flush()

    def catch_up(self, records: Sequence[Mapping[str, JSONValue]]) -> None:
        """Nothing: its events are flushed at every step and purged back to the resume step."""

    def close(self) -> None:
        self.writer.close()


class Wandb:
    """A wandb run named after the run folder, writing under ``$WANDB_DIR`` or the run folder; a
    resumed run continues the same wandb run (its id kept in the run folder)."""

    ID_FILE = "wandb-run-id.txt"

    def __init__(self, run_dir: Path, config: Mapping[str, JSONValue], start_step: int) -> None:
        import wandb

        self.wandb = wandb
        id_file = Path(run_dir) / self.ID_FILE
        run_id = id_file.read_text().strip() if id_file.is_file() else None
        if run_id is None:
            run_id = secrets.token_hex(4)  # wandb's own ids: 8 characters of [a-z0-9]
            id_file.write_text(run_id + "\n")
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", PROJECT),
            name=Path(run_dir).name,
            dir=os.environ.get("WANDB_DIR") or str(run_dir),
            config=dict(config),
            id=run_id,
            resume="allow",
        )

    def log(
        self, step: int, scalars: Mapping[str, float], samples: Sequence[Mapping[str, JSONValue]]
    ) -> None:
        row: JSONRecord = dict(scalars)
        if samples:
            row["samples"] = self.wandb.Table(columns=list(SAMPLE_COLUMNS), data=sample_rows(step, samples))
        self.run.log(row, step=step)

    def warn(self, step: int, text: str) -> None:
        self.run.summary["warning"] = f"step {step}: {text}"  # shown on the run's overview

    def catch_up(self, records: Sequence[Mapping[str, JSONValue]]) -> None:
        # The resumed run's step is where the server's history ends (0 offline: the offline run
        # replays every earlier step, and a sync keeps the ones the server lacks).
        held = int(getattr(self.run, "step", 0) or 0)
        for record in records:
            if record["step"] >= held:
                self.run.log(finite_scalars(record, drop=("step",)), step=record["step"])

    def close(self) -> None:
        self.run.finish()


def trackio_name(run_dir: Path) -> tuple[str, bool]:
    """The run folder's trackio run name and whether it was kept from before: ``<folder>-<6 hex>``,
    written to :data:`Trackio.NAME_FILE` the first time, so two folders named ``run`` are two
    trackio runs and a resumed one is the same. A folder from before the file (resumed: its
    ``checkpoint.pt`` is there) keeps the folder's name it was logged under."""
    run_dir = Path(run_dir)
    kept = run_dir / Trackio.NAME_FILE
    if kept.is_file():
        return kept.read_text().strip(), True
    if RunFolder(run_dir).checkpoint.is_file():
        return run_dir.name, True
    name = f"{run_dir.name}-{secrets.token_hex(3)}"
    kept.write_text(name + "\n")
    return name, False


def _drop_steps_from(project: str, name: str, start_step: int) -> None:
    """Delete trackio's rows of run ``name`` at ``start_step`` and after: a resumed run logs those
    steps again (trackio appends a row per log call, so it would hold them twice)."""
    import sqlite3

    from trackio.sqlite_storage import SQLiteStorage

    db = SQLiteStorage.get_project_db_path(project)
    if not db.exists():
        return
    with SQLiteStorage._get_connection(db) as conn:
        try:
            who = SQLiteStorage._resolve_run_identity(conn, run_name=name)
            if who is not None:  # the column is trackio's own name ("run_id" or "run_name")
                conn.execute(f"DELETE FROM metrics WHERE {who[0]} = ? AND step >= ?", (who[1], start_step))
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):  # nothing logged yet: nothing to drop
                raise


class Trackio:
    """A trackio run named ``<folder>-<6 hex>`` (:func:`trackio_name`; its own system metrics off:
    only the run's)."""

    NAME_FILE = "trackio-run-name.txt"

    def __init__(self, run_dir: Path, config: Mapping[str, JSONValue], start_step: int) -> None:
        import trackio

        self.trackio = trackio
        self.project = os.environ.get("TRACKIO_PROJECT", PROJECT)
        self.name, kept = trackio_name(run_dir)
        if kept:
            _drop_steps_from(self.project, self.name, start_step)
        trackio.init(
            project=self.project,
            name=self.name,
            config=dict(config),
            resume="allow" if kept else "never",
            auto_log_cpu=False,
            auto_log_gpu=False,
        )

    def log(
        self, step: int, scalars: Mapping[str, float], samples: Sequence[Mapping[str, JSONValue]]
    ) -> None:
        row: JSONRecord = dict(scalars)
        if samples:
            row["samples"] = self.trackio.Table(columns=list(SAMPLE_COLUMNS), data=sample_rows(step, samples))
        self.trackio.log(row, step=step)

    def warn(self, step: int, text: str) -> None:
        """trackio logs numbers and tables only: the warning stays on stderr and in the summary."""

    def catch_up(self, records: Sequence[Mapping[str, JSONValue]]) -> None:
        from trackio.sqlite_storage import SQLiteStorage

        held = {row.get("step") for row in SQLiteStorage.get_logs(self.project, self.name)}
        for record in records:
            if record["step"] not in held:
                self.trackio.log(finite_scalars(record, drop=("step",)), step=record["step"])

    def close(self) -> None:
        self.trackio.finish()


TRACKERS: dict[str, Callable[[Path, Mapping[str, JSONValue], int], Tracker]] = {
    "tensorboard": TensorBoard,
    "wandb": Wandb,
    "trackio": Trackio,
}
"""``report_to`` name -> tracker, built as ``cls(run_dir, config, start_step)``."""
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
"""The package each tracker needs installed."""


def refusal(names: Sequence[str]) -> str | None:
    """Why ``report_to`` cannot run, in one line, or None: an unknown name, ``none`` beside
    another, or a tracker whose package is not installed (checked without importing it)."""
    unknown = [n for n in names if n not in TRACKERS and n != NONE]
    if unknown:
        return f"unknown tracker {unknown[0]!r}: choose from {[*TRACKERS, NONE]}"
    if NONE in names and len(names) > 1:
        return f"{NONE!r} turns every tracker off; name it alone"
    missing = [n for n in names if n != NONE and importlib.util.find_spec(PACKAGES[n]) is None]
    if missing:
        return (
            f"{missing[0]} is not installed: pip install {PACKAGES[missing[0]]} "
            "(or pip install 'agon-env[track]'), or leave it out of --report-to"
        )
    return None


def open_trackers(
    names: Sequence[str], run_dir: Path, config: Mapping[str, JSONValue], start_step: int = 0
) -> list[Tracker]:
    """The trackers ``names`` asks for, each with its run started (``none``: no tracker)."""
    opened: list[Tracker] = []
    for name in dict.fromkeys(n for n in names if n != NONE):
        try:
            opened.append(TRACKERS[name](run_dir, config, start_step))
        except Exception as exc:
            for tracker in opened:
                tracker.close()
            raise TrackerError(
                f"--report-to {name}: could not start its run ({' '.join(str(exc).split())})"
            ) from exc
    return opened


def _markdown(sample: Mapping[str, JSONValue]) -> str:
    verdict = f"reward {sample['reward']:.2f}, correct {sample['correct']}, format {sample['format_ok']}"
    # Four-space indentation keeps the texts verbatim in TensorBoard's markdown view.
    block = "\n".join("    " + line for line in (sample["prompt"] + sample["completion"]).splitlines())
    return f"**{sample['seat']}** as {sample['role']} ({verdict})\n\n{block}"


def _yaml_block(config: Mapping[str, JSONValue]) -> str:
    import yaml

    text = yaml.safe_dump(dict(config), sort_keys=False)
    return "\n".join("    " + line for line in text.splitlines())
