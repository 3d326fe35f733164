"""A unit's own records: when it started, when its results were written, and hashes of what it
wrote, kept in the study folder beside (not inside) the results file.

- ``units/NAME.started``: the time its child first took the unit (a resumed unit keeps the first
  start), written before it trains or evaluates anything;
- ``eval/NAME/unit.json``: written after its ``eval.json``: ``started_at`` (from ``.started``),
  ``written_at``, ``eval_sha256`` (the ``eval.json`` it wrote) and ``adapters`` (each trained adapter
  file's sha256, relative to the run's ``adapters/``; none for an evaluation alone).

``agon study verify --study DIR`` (``agon_env.study.binding``) reads them back: a missing time is a
failure, never "not late".
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from agon_env.run_folder import ADAPTERS, EVAL_REPORT
from agon_env.study.folder import STARTED, StudyFolder, UnitRecord, write_text_atomic

__all__ = ["STARTED", "adapter_hashes", "file_sha256", "mark_started", "unit_stamp"]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mark_started(study: StudyFolder, name: str) -> str:
    """The unit's first start (written now unless an earlier run of it wrote one)."""
    path = study.started(name)
    if not path.is_file():
        write_text_atomic(path, now() + "\n")
    return path.read_text().strip()


def adapter_hashes(run_dir: Path | None) -> dict[str, str]:
    """Each file under ``run_dir/adapters`` -> its sha256 (``{}``: no run, or no adapters)."""
    folder = None if run_dir is None else run_dir / ADAPTERS
    if folder is None or not folder.is_dir():
        return {}
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): file_sha256(p) for p in files}


def unit_stamp(eval_dir: Path, started_at: str, run_dir: Path | None) -> UnitRecord:
    """``unit.json``'s content for a unit whose ``eval.json`` was just written."""
    return UnitRecord(
        started_at=started_at,
        written_at=now(),
        pid=os.getpid(),
        eval_sha256=file_sha256(eval_dir / EVAL_REPORT),
        adapters=adapter_hashes(run_dir),
    )
