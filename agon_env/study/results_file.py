"""``results.json``: the one module that writes a study's results file and reads it back.

:func:`agon_env.study.results.build` makes the document from a study's finished units;
``agon study report``, ``verify``, ``diff`` and ``transfer`` and the paired benchmark read a
written one here, as :class:`StudyResults`: every unit's per-method maps already in today's
method names (a file recorded by an older version, such as ``docs/results/replication_cpu.json``,
is brought up to date by :func:`agon_env.upgrade.upgrade_results`, once, at the moment it is read).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from agon_env.errors import MissingFile
from agon_env.evaluation.report import write_text_atomic
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.study.errors import ResultsFileError
from agon_env.study.folder import RESULTS
from agon_env.upgrade import upgrade_results

__all__ = [
    "RESULTS",
    "KeysOf",
    "Outcomes",
    "PairedDifference",
    "ResultsDocument",
    "StudyResults",
    "Summary",
    "UnitOutcome",
    "read_results",
    "write_results",
]


class UnitOutcome(TypedDict, total=False):
    """One unit's record under ``outcomes`` (an arm × seed, or ``base``), as
    :func:`agon_env.study.results.unit_record` and ``collect`` write it."""

    outcomes: dict[str, list[int | None]]
    """Per method, 0/1 per test problem in the test-id order (None: not judged)."""
    first_outcomes: dict[str, list[int | None]]
    """Per two-turn method, the drafts' 0/1 outcomes."""
    mean_length: dict[str, float | None]
    mean_final_length: dict[str, float | None]
    score_errors: dict[str, int | None]
    score_timeouts: dict[str, int | None]
    turns: dict[str, JSONValue]
    token_cap: dict[str, JSONValue]
    settings: JSONValue
    started_at: str | None
    written_at: str
    chosen_cascade: str | None
    validation: dict[str, JSONRecord] | None
    post_hoc_differs: bool | None
    answers_differ: JSONValue
    training: JSONRecord
    """The run's training rates (:func:`agon_env.study.results.training`)."""


KeysOf = Callable[[UnitOutcome], list[str]]
"""Which outcome lists of a unit a reported method reads."""


class Outcomes(TypedDict):
    """The results' ``outcomes``: per arm and seed (seeds as strings) each unit, the base's."""

    arms: dict[str, dict[str, UnitOutcome]]
    base: UnitOutcome | None
    missing: list[str]
    """The units not run (yet)."""


class PairedDifference(TypedDict, total=False):
    """One paired difference of the summary (``agon − grpo, standalone``), in pass@1."""

    mean: float
    low: float
    high: float
    seeds: int
    problems: int
    seeds_used: list[str]
    per_seed: dict[str, float]
    t_interval_over_seeds: list[float] | None
    discordant: dict[str, int]


class Summary(TypedDict, total=False):
    """What the tables show, computed from the outcome lists alone
    (:func:`agon_env.study.analysis.summary_from_outcomes`)."""

    seeds: list[str]
    left_out: list[str]
    base: dict[str, JSONRecord]
    arms: dict[str, dict[str, JSONRecord]]
    paired: dict[str, PairedDifference]
    second_turn: dict[str, JSONRecord]
    alike: dict[str, JSONRecord]
    confidence: float


class ResultsDocument(TypedDict, total=False):
    """A study's ``results.json`` (:func:`agon_env.study.results.build`)."""

    bench: str
    command: str
    task: JSONRecord
    model: str
    plan: JSONRecord
    """The plan as it resolved (:func:`agon_env.study.results.plan_record`)."""
    hashes: JSONRecord
    registration: JSONRecord | None
    calibration: JSONRecord
    problems: JSONRecord
    outcomes: Outcomes
    summary: Summary
    complete: bool
    failed_units: dict[str, str]
    added_comparisons: list[list[str]]
    transfer: JSONRecord


@dataclass(frozen=True)
class StudyResults:
    """A study's results file read back. ``document`` is the whole JSON document in today's layout
    (what the tables, the summary and ``verify`` read); the properties name its parts."""

    document: ResultsDocument
    path: Path | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, JSONValue], path: Path | None = None) -> StudyResults:
        """A results file from its JSON document (upgraded from an older layout first)."""
        outcomes = doc.get("outcomes") if isinstance(doc, Mapping) else None
        if not isinstance(outcomes, Mapping) or not isinstance(outcomes.get("arms"), Mapping):
            raise ResultsFileError(f"{path or 'document'}: not a study results file (no outcomes.arms)")
        return cls(cast(ResultsDocument, upgrade_results(doc)), path)

    @property
    def outcomes(self) -> Outcomes:
        """Per arm and seed (and ``base``) each unit's outcome lists; ``missing``: units not run."""
        return self.document["outcomes"]

    @property
    def summary(self) -> Summary:
        """What the tables show, recomputed from the outcome lists (``agon study verify``)."""
        return self.document.get("summary", Summary())

    @property
    def plan(self) -> JSONRecord:
        """The plan as it resolved (settings the tables name, the whole plan under ``study``)."""
        return self.document.get("plan", {})

    @property
    def registration(self) -> JSONRecord | None:
        """The registration the study was run under (None: not registered)."""
        return self.document.get("registration")

    @property
    def test_ids(self) -> list[str]:
        """The test problem ids, in the order of every outcome list."""
        test = self.document["problems"]["test"]
        assert isinstance(test, dict) and isinstance(test["ids"], list)
        return [str(i) for i in test["ids"]]


def results_path(path: str | Path) -> Path:
    """``path`` itself, or ``path/results.json`` when ``path`` is a (study) folder."""
    path = Path(path)
    return path / RESULTS if path.is_dir() else path


def read_results(path: str | Path) -> StudyResults:
    """The results file at ``path`` (or in the study folder ``path``); ``FileNotFoundError`` when
    there is none, :class:`ResultsFileError` when the file is not one."""
    path = results_path(path)
    if not path.is_file():
        raise MissingFile(f"no results file {path}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ResultsFileError(f"{path}: not a study results file (not JSON)") from None
    return StudyResults.from_document(doc, path)


def write_results(doc: StudyResults | ResultsDocument, path: Path) -> None:
    """The results file, compact (~9 units × 6 methods × 300 outcomes)."""
    document = doc.document if isinstance(doc, StudyResults) else doc
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")
