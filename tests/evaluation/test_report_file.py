"""``eval.json``'s one reader and writer: a written report reads back as the same document, an
older file (the few-shot base stored as ``zero-shot``) reads in today's method names for every
consumer, and "which run is mine" has one answer."""

import json
import random
from pathlib import Path

import pytest
from eval_fakes import FakeAgent, hashed

from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.methods import Policies
from agon_env.evaluation.report_file import (
    EvalReportError,
    read_eval_report,
    write_eval_report,
)
from agon_env.evaluation.splits import load_eval_data
from agon_env.serving.cascade import recorded_direction
from agon_env.serving.export import figures


@pytest.fixture(scope="module")
def report() -> dict:
    data = load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=8, val_problems=4)
    rng = random.Random(1)
    runs = []
    for i in range(2):
        pol = Policies(
            f"runs/agon-seed{i}",
            FakeAgent("base", hashed("base", 3)),
            {
                "agent_a": FakeAgent("a", lambda p: rng.random() < 0.5),
                "agent_b": FakeAgent("b", hashed(f"b{i}", 2), fixes=True),
            },
            algo="agon",
        )
        runs.append(Evaluator(data, seeds=[0]).evaluate(pol))
    return {"data": data.describe(), "seeds": [0], "confidence": 0.95, "runs": runs, "seconds": 1.0}


def _old(report: dict) -> dict:
    """The report as a version up to 35d8054 stored it: the few-shot base named ``zero-shot``."""
    old = json.loads(json.dumps(report))
    for run in old["runs"]:
        run["methods"]["zero-shot"] = {**run["methods"].pop("base-few-shot"), "family": "zero-shot"}
    return old


def test_a_written_report_reads_back_as_its_document(report, tmp_path: Path) -> None:
    path, _ = write_eval_report(report, tmp_path)
    back = read_eval_report(tmp_path)  # a folder names its eval.json
    assert back.path == path
    assert back.document == json.loads(path.read_text())
    assert back.data == report["data"] and back.seeds == (0,)
    assert [r.label for r in back.runs] == ["runs/agon-seed0", "runs/agon-seed1"]
    assert back.runs[1].methods.keys() == report["runs"][1]["methods"].keys()
    assert back.runs[0].chosen == report["runs"][0]["selection"]["chosen"]


def test_which_run_is_mine_has_one_answer(report, tmp_path: Path) -> None:
    write_eval_report(report, tmp_path)
    back = read_eval_report(tmp_path)
    assert back.run_of("runs/agon-seed1") is back.runs[1]
    assert back.run_of("runs/elsewhere") is None  # two runs, none of them this folder's
    write_eval_report({**report, "runs": report["runs"][:1]}, tmp_path / "one")
    one = read_eval_report(tmp_path / "one")
    assert one.run_of("moved/agon-seed0") is one.runs[0]  # a report of one run, read from elsewhere


def test_an_old_report_reads_in_todays_method_names_for_every_consumer(report, tmp_path: Path) -> None:
    run_dir = tmp_path / "agon-seed0"
    run_dir.mkdir()
    old = _old({**report, "runs": [{**report["runs"][0], "label": str(run_dir)}]})
    (tmp_path / "eval.json").write_text(json.dumps(old))
    read = read_eval_report(tmp_path / "eval.json")
    assert "base-few-shot" in read.runs[0].methods and "zero-shot" not in read.runs[0].methods
    # the model card's figures (export) and the served cascade's direction go through it too
    lines, direction = figures(run_dir, tmp_path / "eval.json")
    rows = [line for line in lines if line.startswith("| ")]
    assert any(row.startswith("| base-few-shot") for row in rows)
    assert not any("zero-shot" in row for row in rows)
    assert direction == recorded_direction(run_dir, tmp_path / "eval.json") == read.runs[0].chosen


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"runs": 3}'])
def test_a_file_that_is_no_report_is_refused_in_one_line(text: str, tmp_path: Path) -> None:
    (tmp_path / "eval.json").write_text(text)
    with pytest.raises(EvalReportError, match=r"eval\.json: not an eval report") as err:
        read_eval_report(tmp_path)
    assert "\n" not in str(err.value)
