"""``eval.json``: the one module that writes an evaluation's report file and reads it back.

``agon eval`` writes the report (:func:`write_eval_report`, beside its rendered ``eval.md``);
everything that reads one later (plots, the model card, ``agon serve``/``agon answer``'s
cascade direction, a study's units, calibration and transfer tables, the paired benchmark)
reads it here, as an :class:`EvalReport`: each run's methods already in today's names (an
older file is brought up to date by :func:`agon_env.upgrade.upgrade_eval_report`, once, at
the moment it is read), and "which run in the report is this run folder's" answered by
:meth:`EvalReport.run_of`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agon_env.errors import MissingFile
from agon_env.evaluation.errors import EvalReportError
from agon_env.evaluation.report import REPORT_VERSION, clean, render_markdown, write_text_atomic
from agon_env.run_folder import EVAL_REPORT
from agon_env.upgrade import upgrade_eval_report


@dataclass(frozen=True)
class EvalRun:
    """One evaluated run of a report: its label (the run folder as given to ``agon eval``), its
    results per method id, and the validation choice of cascade direction."""

    label: str
    methods: Mapping[str, Mapping[str, Any]]
    selection: Mapping[str, Any]
    record: Mapping[str, Any]
    """The run's whole entry as stored (complementarity, settings, spread, ...)."""

    @property
    def chosen(self) -> str | None:
        """The cascade ``agon eval`` chose on validation (``cascade:agent_b>agent_a``), if any."""
        return self.selection.get("chosen") or None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> EvalRun:
        return cls(
            label=str(record.get("label", "")),
            methods=record.get("methods") or {},
            selection=record.get("selection") or {},
            record=record,
        )


@dataclass(frozen=True)
class EvalReport:
    """An ``eval.json`` read back: what was evaluated (``data``), with which seeds, and each run."""

    data: Mapping[str, Any]
    seeds: tuple[int, ...]
    runs: tuple[EvalRun, ...]
    document: Mapping[str, Any]
    """The whole document in today's layout (what :func:`render_markdown` and the plots read)."""
    path: Path | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], path: Path | None = None) -> EvalReport:
        """A report from its JSON document (upgraded from an older layout first)."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("runs", []), list):
            raise EvalReportError(f"{path or 'document'}: not an eval report written by `agon eval`")
        doc = upgrade_eval_report(doc)
        runs = tuple(EvalRun.from_record(r) for r in doc.get("runs", []) if isinstance(r, Mapping))
        return cls(doc.get("data") or {}, tuple(doc.get("seeds") or ()), runs, doc, path)

    @property
    def many_seeds(self) -> bool:
        """Evaluated over several seeds: then ``agon eval``'s interval is problem-clustered."""
        return len(self.seeds) > 1

    def run_of(self, run_dir: str | Path) -> EvalRun | None:
        """The run of this report that evaluated ``run_dir``: the one labelled with that folder,
        else the report's only run (a report of one run, moved or read from elsewhere)."""
        target = Path(run_dir).resolve()
        mine = [r for r in self.runs if Path(r.label).resolve() == target]
        if not mine and len(self.runs) == 1:
            mine = list(self.runs)
        return mine[0] if mine else None


def eval_report_path(path: str | Path) -> Path:
    """``path`` itself, or ``path/eval.json`` when ``path`` is a folder."""
    path = Path(path)
    return path / EVAL_REPORT if path.is_dir() else path


def read_eval_report(path: str | Path) -> EvalReport:
    """The eval report at ``path`` (or in the folder ``path``); ``FileNotFoundError`` when there is
    none, :class:`EvalReportError` when the file is not one."""
    path = eval_report_path(path)
    if not path.is_file():
        raise MissingFile(f"{path}: no eval report (agon eval writes {EVAL_REPORT})")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise EvalReportError(f"{path}: not an eval report written by `agon eval`") from None
    return EvalReport.from_document(doc, path)


def write_eval_report(
    report: Mapping[str, Any], out_dir: str | Path, stem: str = Path(EVAL_REPORT).stem
) -> tuple[Path, Path]:
    """``<stem>.json`` and its rendering ``<stem>.md`` in ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = clean({"version": REPORT_VERSION, **report})
    jpath, mpath = out / f"{stem}.json", out / f"{stem}.md"
    mpath.write_text(render_markdown(doc), encoding="utf-8")
    # The JSON last and whole: scripts take its presence to mean "evaluated".
    write_text_atomic(jpath, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return jpath, mpath
