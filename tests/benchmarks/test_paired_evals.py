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


def results_file(a: list[int], b: list[int], casc: list[tuple[int, int]]) -> dict[str, Any]:
    # the same cells as report(): a study results file lists each seed's block of its test problems
    return {
        "plan": {"eval_seeds": [0, 1]},
        "problems": {"test": {"ids": ["p0", "p1"]}},
        "outcomes": {
            "arms": {
                "agon": {
                    "0": {
                        "outcomes": {
                            "standalone:agent_a": a,
                            "standalone:agent_b": b,
                            "cascade:agent_a>agent_b": [c for _, c in casc],
                        },
                        "first_outcomes": {"cascade:agent_a>agent_b": [f for f, _ in casc]},
                        "chosen_cascade": "cascade:agent_a>agent_b",
                    }
                }
            }
        },
    }


def test_a_unit_of_a_study_results_file_pairs_with_an_eval_report() -> None:
    x = report("x", [1, 1, 0, 0], [1, 0, 0, 0], [(1, 1), (0, 1), (1, 0), (0, 0)])
    y = paired_evals.unit_report(
        results_file([0, 1, 0, 0], [0, 0, 0, 0], [(1, 1), (0, 0), (0, 0), (0, 0)]), "agon:0", "r.json"
    )
    res = paired_evals.compare(x, y, ["standalone", "chosen"])
    assert res["methods"]["standalone"]["difference"]["mean"] == pytest.approx(3 / 8 - 1 / 8)
    c = res["methods"]["chosen"]
    assert c["y_method"] == "cascade:agent_a>agent_b" and c["difference"]["mean"] == pytest.approx(1 / 4)
    # the file's draft outcomes give kept and fixed; it records no answer format
    assert c["y_second_turn"] == {"kept": [1, 1], "fixed": [0, 3]}
    casc = [(1, 1), (0, 1), (1, 0), (0, 0)]
    same = paired_evals.unit_report(results_file([1, 1, 0, 0], [1, 0, 0, 0], casc), "agon:0", "r.json")
    assert paired_evals.compare(x, same, ["chosen"])["methods"]["chosen"]["difference"]["mean"] == 0


def test_a_results_file_needs_a_unit_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(__import__("json").dumps(results_file([0] * 4, [0] * 4, [(0, 0)] * 4)))
    with pytest.raises(SystemExit, match="name a unit"):
        paired_evals.read(path, None)
    with pytest.raises(SystemExit, match="has no unit 'grpo:0'; it has agon:0"):
        paired_evals.read(path, "grpo:0")
