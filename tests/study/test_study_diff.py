"""``agon study diff``: a recorded results file against itself and against a copy with flips."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agon_env.study.commands.study import main
from agon_env.study.diff import differences, render, units

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "results" / "study_2.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(RECORDED.read_text())


def test_a_file_agrees_with_itself(doc: dict, capsys: pytest.CaptureFixture[str]) -> None:
    assert differences(doc, copy.deepcopy(doc)) == []
    assert main(["diff", str(RECORDED), str(RECORDED)]) == 0
    assert "every outcome and mean length agree" in capsys.readouterr().out


def test_flipped_outcomes_a_missing_unit_and_method_are_named(
    doc: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flipped = copy.deepcopy(doc)
    name, record = next(iter(units(flipped).items()))
    method = next(iter(record["outcomes"]))
    record["outcomes"][method][0] ^= 1
    record["outcomes"][method][3] ^= 1
    arm, seeds = next((a, s) for a, s in flipped["outcomes"]["arms"].items() if len(s) > 1)
    dropped = sorted(seeds)[-1]
    del seeds[dropped]
    ids = doc["problems"]["test"]["ids"]
    lines = differences(doc, flipped)
    assert f"{name} {method}: 2 of {len(ids)} outcomes differ ({ids[0]}, {ids[3]})" in lines
    assert f"unit {arm}-seed{dropped}: only in A" in lines
    path = tmp_path / "b.json"
    path.write_text(json.dumps(flipped))
    assert main(["diff", str(RECORDED), str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == lines
    other = next(u for u in units(doc) if u not in (name, f"{arm}-seed{dropped}"))
    assert differences(doc, flipped, only=[other]) == []
    assert differences(doc, flipped, only=[name]) == [lines[-1]]


def test_the_output_is_bounded() -> None:
    shown = render([f"line {i}" for i in range(100)], limit=10).splitlines()
    assert len(shown) == 11 and shown[-1] == "... and 90 more differences"


def test_a_different_mean_length_is_named_where_every_outcome_agrees(doc: dict) -> None:
    # An untrained model scores 0 everywhere: two runs that sampled other completions agree on
    # every outcome, and only their lengths tell them apart.
    other = copy.deepcopy(doc)
    name, record = next(iter(units(other).items()))
    method = next(iter(record["mean_length"]))
    was = record["mean_length"][method]
    record["mean_length"][method] = was + 0.5
    assert differences(doc, other) == [f"{name} {method}: mean length {was:.2f} vs {was + 0.5:.2f} tokens"]
