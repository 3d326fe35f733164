"""The study folder ``agon study run --out DIR`` writes: every path in it, spelled once, and its
small documents typed, each with one reader and one writer.

::

    DIR/
      plan.yaml            the plan as it resolved (the grid expanded), read back by every command
      study.json           :class:`StudyStart`: the prompts' fingerprint and when the study began
      registration.json    :class:`Registration` (``agon study register``; before any unit starts)
      calibration.json     :class:`CalibrationRecord`: the task level the units train and test at
      results.json         the results document (its reader and writer: study.results_file)
      report.md            the report, sealed with the results file's sha256
      accuracy_vs_length.png
      failed.json          the units that failed in the last run, each with its log's last line
      units/NAME.json      a unit's spec (study.units.Unit)   units/NAME.yaml  an arm's config
      units/NAME.started   when its child first took it
      locks/NAME/.lock     its flock (names the holder's pid)
      logs/NAME.log        its output
      runs/NAME/           an arm unit's run folder (:class:`agon_env.run_folder.RunFolder`)
      eval/NAME/           its eval.json and :class:`UnitRecord` (unit.json)
      calibration/KEY=VALUE/  a calibration level's eval.json
      transfer/TASK/NAME/  ``agon study eval``'s evaluations on another task

Writers produce exactly the bytes earlier versions wrote, so recorded folders, and the hashes
taken of their files, still verify. A file an older version wrote is read through
:mod:`agon_env.upgrade` before anything here sees it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from agon_env.errors import MissingFile
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import EVAL_REPORT, RunFolder

PLAN = "plan.yaml"
START = "study.json"
REGISTRATION = "registration.json"
CALIBRATION = "calibration.json"
RESULTS = "results.json"
REPORT = "report.md"
FIGURE = "accuracy_vs_length.png"
FAILED = "failed.json"
"""The units that failed in a study's last run, each with its log's last line (``agon study run``)."""
UNIT_RECORD = "unit.json"
"""Written into a unit's eval folder after its ``eval.json``: when the unit started and its results
were written, and hashes of its ``eval.json`` and adapters (:mod:`agon_env.study.records`)."""
STARTED = ".started"
"""The suffix of a unit's start record under ``units/`` (``units/grpo-seed0.started``)."""
UNITS, LOCKS, LOGS, RUNS, EVALS, CALIBRATIONS = "units", "locks", "logs", "runs", "eval", "calibration"
TRANSFER = "transfer"
"""The study folder's sub-folder of transfer evaluations, and the results file's section."""


def write_text_atomic(path: Path, text: str) -> None:
    """Every document here is replaced whole (a reader never sees half of one)."""
    from agon_env.evaluation.report import write_text_atomic as write

    write(path, text)


@dataclass(frozen=True)
class StudyStart:
    """``study.json``: the prompts the study's units run under, and when it first ran."""

    prompts: str
    started_at: str

    def to_json(self) -> str:
        return json.dumps({"prompts": self.prompts, "started_at": self.started_at}) + "\n"

    @classmethod
    def from_json(cls, text: str) -> StudyStart:
        doc = json.loads(text)
        return cls(str(doc["prompts"]), str(doc["started_at"]))


@dataclass(frozen=True)
class Measured:
    """One calibration level's base few-shot pass@1 on validation."""

    successes: int
    trials: int
    rate: float

    def to_record(self) -> JSONRecord:
        return {"successes": self.successes, "trials": self.trials, "rate": self.rate}


@dataclass(frozen=True)
class CalibrationRecord:
    """``calibration.json``: the calibrated keyword, the level chosen and every level measured;
    a plan without calibration records only an empty ``task`` and ``measured``."""

    task: JSONRecord = field(default_factory=dict)
    """The keywords every unit adds to the plan's (``{"difficulty": 3}``; ``{}`` uncalibrated)."""
    measured: dict[str, Measured] = field(default_factory=dict)
    keyword: str | None = None
    chosen: JSONValue = None

    def to_record(self) -> JSONRecord:
        head: JSONRecord = {} if self.keyword is None else {"keyword": self.keyword, "chosen": self.chosen}
        measured: JSONRecord = {k: m.to_record() for k, m in self.measured.items()}
        return {**head, "task": dict(self.task), "measured": measured}

    def to_json(self) -> str:
        return json.dumps(self.to_record()) + "\n"

    @classmethod
    def from_record(cls, doc: JSONRecord) -> CalibrationRecord:
        measured = doc.get("measured") or {}
        assert isinstance(measured, dict)
        task = doc.get("task") or {}
        assert isinstance(task, dict)
        keyword = doc.get("keyword")
        return cls(
            task=dict(task),
            measured={k: Measured(**v) for k, v in measured.items() if isinstance(v, dict)},  # type: ignore[arg-type]
            keyword=None if keyword is None else str(keyword),
            chosen=doc.get("chosen"),
        )


@dataclass(frozen=True)
class UnitRecord:
    """``eval/NAME/unit.json``: when the unit started and its results were written, the writer's
    pid, the sha256 of its ``eval.json`` and of each adapter file (relative to ``adapters/``).
    A record written before units recorded their start has no ``started_at``."""

    written_at: str | None
    started_at: str | None = None
    pid: int | None = None
    eval_sha256: str | None = None
    adapters: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        doc: JSONRecord = {
            "started_at": self.started_at,
            "written_at": self.written_at,
            "pid": self.pid,
            "eval_sha256": self.eval_sha256,
            "adapters": dict(self.adapters),
        }
        return json.dumps(doc) + "\n"

    @classmethod
    def from_json(cls, text: str) -> UnitRecord:
        doc = json.loads(text)
        return cls(
            doc.get("written_at"),
            doc.get("started_at"),
            doc.get("pid"),
            doc.get("eval_sha256"),
            dict(doc.get("adapters") or {}),
        )


@dataclass(frozen=True)
class Registration:
    """``registration.json`` (and the copy a results file carries), in today's layout.

    The whole document is kept as read: the results file embeds it and ``agon study verify``
    compares the two field by field, so nothing may be dropped or reordered on the way through.
    The properties name what the code reads."""

    document: JSONRecord

    @classmethod
    def from_record(cls, doc: JSONRecord) -> Registration:
        return cls(dict(doc))

    def to_json(self) -> str:
        return json.dumps(self.document, indent=1, ensure_ascii=False) + "\n"

    def _str(self, key: str) -> str | None:
        value = self.document.get(key)
        return None if value is None else str(value)

    @property
    def plan_sha256(self) -> str:
        return str(self.document["plan_sha256"])

    @property
    def preset_sha256(self) -> str | None:
        return self._str("preset_sha256")

    @property
    def prompts(self) -> str:
        return str(self.document["prompts"])

    @property
    def registered_at(self) -> str | None:
        return self._str("registered_at")

    @property
    def git_commit(self) -> str | None:
        return self._str("git_commit")

    @property
    def fingerprint(self) -> str | None:
        return self._str("fingerprint")

    @property
    def plan(self) -> JSONRecord:
        plan = self.document.get("plan")
        return plan if isinstance(plan, dict) else {}

    @property
    def anchor(self) -> JSONRecord | None:
        """What the fingerprint hashes (None: registered before fingerprints, the older rules)."""
        anchor = self.document.get("anchor")
        return anchor if isinstance(anchor, dict) and anchor else None

    @property
    def detectable(self) -> JSONRecord:
        power = self.document.get("detectable")
        return power if isinstance(power, dict) else {}


@dataclass(frozen=True)
class StudyFolder:
    """The paths of one study folder, and its documents read and written (nothing is read or
    created by building one)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    # the study's own files
    @property
    def plan(self) -> Path:
        return self.path / PLAN

    @property
    def start(self) -> Path:
        return self.path / START

    @property
    def registration(self) -> Path:
        return self.path / REGISTRATION

    @property
    def calibration(self) -> Path:
        return self.path / CALIBRATION

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def figure(self) -> Path:
        return self.path / FIGURE

    @property
    def failed(self) -> Path:
        return self.path / FAILED

    # each unit's
    @property
    def units(self) -> Path:
        return self.path / UNITS

    def spec(self, name: str) -> Path:
        return self.units / f"{name}.json"

    def unit_config(self, name: str) -> Path:
        return self.units / f"{name}.yaml"

    def started(self, name: str) -> Path:
        return self.units / f"{name}{STARTED}"

    def lock(self, name: str) -> Path:
        """The unit's lock folder (its ``.lock`` file is :class:`agon_env.study.units.Lock`'s)."""
        return self.path / LOCKS / name

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def run(self, name: str) -> RunFolder:
        return RunFolder(self.path / RUNS / name)

    def eval_dir(self, name: str) -> Path:
        return self.path / EVALS / name

    def eval_report(self, name: str) -> Path:
        return self.eval_dir(name) / EVAL_REPORT

    def unit_record(self, name: str) -> Path:
        return self.eval_dir(name) / UNIT_RECORD

    def calibration_dir(self, level: str) -> Path:
        """A calibration level's eval folder (``level``: ``KEY=VALUE``)."""
        return self.path / CALIBRATIONS / level

    def transfer_dir(self, task: str, name: str | None = None) -> Path:
        folder = self.path / TRANSFER / task
        return folder if name is None else folder / name

    # what is in it
    def is_study(self) -> bool:
        return self.plan.is_file()

    def require(self) -> StudyFolder:
        """This folder, refused (``MissingFile``) when ``agon study run`` did not make it."""
        if not self.is_study():
            raise MissingFile(f"{self.path} is no study folder (no {PLAN}); `agon study run` makes one")
        return self

    def any_started(self) -> bool:
        return any(self.units.glob(f"*{STARTED}"))

    def any_evaluated(self) -> bool:
        return any((self.path / EVALS).glob(f"*/{EVAL_REPORT}"))

    # its documents: one reader and one writer each
    def read_start(self) -> StudyStart | None:
        return StudyStart.from_json(self.start.read_text()) if self.start.is_file() else None

    def write_start(self, start: StudyStart) -> None:
        write_text_atomic(self.start, start.to_json())

    def read_registration(self) -> Registration | None:
        path = self.registration
        return Registration.from_record(json.loads(path.read_text())) if path.is_file() else None

    def write_registration(self, reg: Registration) -> None:
        write_text_atomic(self.registration, reg.to_json())

    def read_calibration(self) -> CalibrationRecord | None:
        path = self.calibration
        return CalibrationRecord.from_record(json.loads(path.read_text())) if path.is_file() else None

    def write_calibration(self, record: CalibrationRecord) -> None:
        write_text_atomic(self.calibration, record.to_json())

    def read_failed(self) -> dict[str, str]:
        """Each unit that failed in the last run -> its log's last line (``{}``: none failed)."""
        return json.loads(self.failed.read_text()) if self.failed.is_file() else {}

    def write_failed(self, failed: dict[str, str]) -> None:
        """``failed.json`` for the last run (no file when none failed)."""
        if failed:
            write_text_atomic(self.failed, json.dumps(failed, indent=1) + "\n")
        else:
            self.failed.unlink(missing_ok=True)

    def read_unit_record(self, name: str) -> UnitRecord | None:
        return read_unit_record(self.eval_dir(name))

    def read_unit_started(self, name: str) -> str | None:
        path = self.started(name)
        return path.read_text().strip() if path.is_file() else None


def read_unit_record(eval_dir: Path) -> UnitRecord | None:
    """The ``unit.json`` in a unit's eval folder (None: there is none)."""
    path = eval_dir / UNIT_RECORD
    return UnitRecord.from_json(path.read_text()) if path.is_file() else None


def write_unit_record(eval_dir: Path, record: UnitRecord) -> None:
    write_text_atomic(eval_dir / UNIT_RECORD, record.to_json())
