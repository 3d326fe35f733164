"""``results.json``: the one module that writes a study's results file and reads it back.

:func:`agon_env.study.results.build` makes the document from a study's finished units;
``agon study report``, ``verify``, ``diff`` and ``transfer`` and the paired benchmark read a
written one here, as :class:`StudyResults`: every unit's per-method maps already in today's
method names (a file recorded by an older version, such as ``docs/results/replication_cpu.json``,
is brought up to date by :func:`agon_env.upgrade.upgrade_results`, once, at the moment it is read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agon_env.errors import MissingFile
from agon_env.evaluation.report import write_text_atomic
from agon_env.study.errors import ResultsFileError
from agon_env.upgrade import upgrade_results

RESULTS = "results.json"


@dataclass(frozen=True)
class StudyResults:
    """A study's results file read back. ``document`` is the whole JSON document in today's layout
    (what the tables, the summary and ``verify`` read); the properties name its parts."""

    document: dict[str, Any]
    path: Path | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], path: Path | None = None) -> StudyResults:
        """A results file from its JSON document (upgraded from an older layout first)."""
        outcomes = doc.get("outcomes") if isinstance(doc, Mapping) else None
        if not isinstance(outcomes, Mapping) or not isinstance(outcomes.get("arms"), Mapping):
            raise ResultsFileError(f"{path or 'document'}: not a study results file (no outcomes.arms)")
        return cls(upgrade_results(doc), path)

    @property
    def outcomes(self) -> dict[str, Any]:
        """Per arm and seed (and ``base``) each unit's outcome lists; ``missing``: units not run."""
        return self.document["outcomes"]

    @property
    def summary(self) -> dict[str, Any]:
        """What the tables show, recomputed from the outcome lists (``agon study verify``)."""
        return self.document.get("summary", {})

    @property
    def plan(self) -> dict[str, Any]:
        """The plan as it resolved (settings the tables name, the whole plan under ``study``)."""
        return self.document.get("plan", {})

    @property
    def registration(self) -> dict[str, Any] | None:
        """The registration the study was run under (None: not registered)."""
        return self.document.get("registration")

    @property
    def test_ids(self) -> list[str]:
        """The test problem ids, in the order of every outcome list."""
        return self.document["problems"]["test"]["ids"]


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


def write_results(doc: StudyResults | Mapping[str, Any], path: Path) -> None:
    """The results file, compact (~9 units × 6 methods × 300 outcomes)."""
    document = doc.document if isinstance(doc, StudyResults) else doc
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")
