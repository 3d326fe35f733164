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
    summary = json.loads(lines[-1])
    assert summary["files"] == 1 and summary["largest_gap_in_band"]["file"] == "a.json"  # solve 50 %


def test_the_pick_is_the_largest_gap_among_rows_the_base_solves_20_to_60_percent(
    tmp_path: Path, capsys
) -> None:
    def doc(right: list[bool], reader: list[bool]) -> dict:
        outcomes = [
            {
                "problem_id": f"p{i}",
                "draft_correct": d,
                "reader_correct": r,
                "reader_changed": d != r,
                "leak": False,
            }
            for i, (d, r) in enumerate(zip(right, reader, strict=True))
        ]
        return {
            "config": {"env": "agon/arith-v0", "env_kwargs": []},
            "confidence": 0.95,
            "outcomes": outcomes,
        }

    (tmp_path / "unsolved.json").write_text(json.dumps(doc([False] * 4, [False] * 4)))  # gap 0, solve 0
    (tmp_path / "banded.json").write_text(
        json.dumps(doc([True, False, False, False], [False] * 4))
    )  # gap -25
    probe_table.main([str(tmp_path / "unsolved.json"), str(tmp_path / "banded.json")])
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["largest_gap"]["file"] == "unsolved.json"
    assert (
        summary["largest_gap_in_band"]["file"] == "banded.json"
        and summary["largest_gap_in_band"]["solve"] == 0.25
    )
