"""``agon study diff A B``: two results files compared outcome by outcome (issue 50)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from agon_env.study.diff import diff, diff_files

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "results" / "study_2.json"


def _doc() -> dict:
    return json.loads(RECORDED.read_text())


def test_a_file_and_its_copy_agree():
    assert diff_files(RECORDED, RECORDED) == []


def test_a_flipped_outcome_is_named_by_unit_method_and_problem():
    a = _doc()
    b = copy.deepcopy(a)
    unit = b["outcomes"]["arms"]["agon"]["1"]
    method = sorted(unit["outcomes"])[0]
    unit["outcomes"][method][7] = 1 - unit["outcomes"][method][7]
    problem = a["problems"]["test"]["ids"][7]
    assert diff(a, b) == [f"agon-seed1 outcomes {method}: 1 problem(s) differ ({problem})"]


def test_other_completions_a_dropped_unit_and_other_problems_are_each_named():
    a = _doc()
    b = copy.deepcopy(a)
    lengths = b["outcomes"]["arms"]["grpo"]["0"]["mean_length"]
    method = sorted(lengths)[0]
    lengths[method] += 0.5
    del b["outcomes"]["arms"]["coop"]["2"]
    found = diff(a, b)
    assert "coop-seed2: only in A" in found
    assert any(line.startswith(f"grpo-seed0 mean_length {method}:") for line in found)
    assert len(found) == 2
    c = copy.deepcopy(a)
    c["problems"]["test"]["ids"] = c["problems"]["test"]["ids"][::-1]
    assert diff(a, c)[0].startswith("test problems:")


def test_the_command_exits_1_on_a_difference_and_0_on_none(tmp_path):
    b = _doc()
    unit = b["outcomes"]["arms"]["agon"]["0"]
    for method in unit["outcomes"]:
        unit["outcomes"][method] = [1 - v for v in unit["outcomes"][method]]
    flipped = tmp_path / "flipped.json"
    flipped.write_text(json.dumps(b))
    cmd = [sys.executable, "-m", "agon_env.cli", "study", "diff"]
    same = subprocess.run([*cmd, str(RECORDED), str(RECORDED)], capture_output=True, text=True, cwd=ROOT)
    assert same.returncode == 0 and "the same outcomes and completions" in same.stdout
    differ = subprocess.run(
        [*cmd, str(RECORDED), str(flipped), "--show", "2"], capture_output=True, text=True, cwd=ROOT
    )
    assert differ.returncode == 1, differ.stderr
    lines = differ.stdout.splitlines()
    assert len(lines) == 4 and lines[2].startswith("... and") and "difference(s)" in lines[3]
