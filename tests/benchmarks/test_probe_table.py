"""benchmarks/probe_table.py recomputes each row from the outcome list, not from the stored summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import probe_table  # a script beside the package, not in it


def test_rows_come_from_the_outcomes(tmp_path: Path, capsys) -> None:
    outcomes = [
        {
            "problem_id": "p1",
            "draft_correct": True,
            "reader_correct": True,
            "reader_changed": False,
            "leak": False,
        },
        {
            "problem_id": "p2",
            "draft_correct": False,
            "reader_correct": True,
            "reader_changed": True,
            "leak": True,
        },
    ]
    doc = {
        "config": {"env": "agon/arith-v0", "env_kwargs": ["difficulty=3"]},
        "confidence": 0.95,
        "outcomes": outcomes,
        "solve": {"rate": 0.99},  # a stale summary must not be what the table shows
    }
    (tmp_path / "a.json").write_text(json.dumps(doc))
    probe_table.main([str(tmp_path / "a.json")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| `agon/arith-v0` difficulty=3 | 2 | 1/2 = 50 | 1/1 | 1/1 | 100 | +50.0")
    assert json.loads(lines[-1])["files"] == 1
