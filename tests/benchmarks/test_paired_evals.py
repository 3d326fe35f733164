"""benchmarks/paired_evals.py pairs two stored eval reports by (evaluation seed, problem)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import paired_evals  # a script beside the package, not in it


def ep(pid: str, correct: bool, first: bool | None = None, fmt: bool = True) -> dict[str, Any]:
    turns = [{"format_ok": True}] + ([{"format_ok": fmt}] if first is not None else [])
    return {"problem_id": pid, "seed": hash(pid), "correct": correct, "first_correct": first, "turns": turns}


def report(label: str, a: list[bool], b: list[bool], casc: list[tuple[bool, bool]]) -> dict[str, Any]:
    # two evaluation seeds, two problems each, listed seed by seed as agon eval writes them
    pids = ["p0", "p1", "p0", "p1"]
    return {
        "seeds": [0, 1],
        "runs": [
            {
                "label": label,
                "selection": {"chosen": "cascade:agent_a>agent_b"},
                "methods": {
                    "standalone:agent_a": {"episodes": [ep(p, c) for p, c in zip(pids, a, strict=True)]},
                    "standalone:agent_b": {"episodes": [ep(p, c) for p, c in zip(pids, b, strict=True)]},
                    "cascade:agent_a>agent_b": {
                        "episodes": [ep(p, c, f, fmt=c) for p, (f, c) in zip(pids, casc, strict=True)]
                    },
                },
            }
        ],
    }


def test_differences_and_second_turn_by_hand() -> None:
    x = report("x", [1, 1, 0, 0], [1, 0, 0, 0], [(1, 1), (0, 1), (1, 0), (0, 0)])
    y = report("y", [0, 0, 0, 0], [0, 0, 0, 0], [(1, 1), (0, 0), (0, 0), (0, 0)])
    res = paired_evals.compare(x, y, ["standalone", "chosen"])
    s = res["methods"]["standalone"]
    assert s["x_pass@1"] == pytest.approx(3 / 8) and s["y_pass@1"] == 0
    assert s["difference"]["mean"] == pytest.approx(3 / 8)
    assert (s["difference"]["seeds"], s["difference"]["problems"]) == (2, 2)
    c = res["methods"]["chosen"]
    assert c["x_method"] == "cascade:agent_a>agent_b"
    assert c["difference"]["mean"] == pytest.approx(2 / 4 - 1 / 4)
    # x: drafts right in 2 episodes, one kept; wrong in 2, one fixed; 2 of 4 final turns in format
    assert c["x_second_turn"] == {"kept": [1, 2], "fixed": [1, 2], "final_format": [2, 4]}


def test_refuses_reports_of_other_problems() -> None:
    x = report("x", [1, 1, 0, 0], [1, 0, 0, 0], [(1, 1)] * 4)
    y = report("y", [1, 1, 0, 0], [1, 0, 0, 0], [(1, 1)] * 4)
    y["runs"][0]["methods"]["standalone:agent_a"]["episodes"][3]["problem_id"] = "p9"
    with pytest.raises(SystemExit, match="not comparable"):
        paired_evals.compare(x, y, ["standalone"])


def test_standalone_of_a_one_adapter_run() -> None:
    x = report("x", [1, 1, 0, 0], [1, 0, 0, 0], [(1, 1)] * 4)
    y = report("y", [1, 0, 0, 0], [0, 0, 0, 0], [(1, 1)] * 4)
    del y["runs"][0]["methods"]["standalone:agent_b"]  # a grpo run trains agent_a only
    res = paired_evals.compare(x, y, ["standalone"])
    assert res["methods"]["standalone"]["y_pass@1"] == pytest.approx(1 / 4)
    assert res["methods"]["standalone"]["difference"]["mean"] == pytest.approx(3 / 8 - 1 / 4)
