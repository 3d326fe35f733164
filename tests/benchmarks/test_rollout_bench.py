"""benchmarks/rollout_bench.py at its smallest size on the tiny model: every run and ratio, a JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_rollout_bench_times_both_sides_with_and_without_an_adapter() -> None:
    flags = ["--model", "tiny", "--batches", "2", "--reps", "1", "--max-new-tokens", "4", "--threads", "1"]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "rollout_bench.py"), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["bench"] == "rollout" and result["model"] == "tiny" and result["seeds"] == "per-row"
    row = result["results"]["2"]
    sides = ("generate_base", "ours_base", "generate_adapter", "ours_adapter", "ours_adapter_prefix_copied")
    for side in sides:
        assert row[f"{side}_tok_s"] > 0 and 0 < row[f"{side}_tokens"] <= 2 * 4
    ratio = row["ours_adapter_tok_s"] / row["generate_adapter_tok_s"]  # from rounded rates: 1 % slack
    assert row["ratio_adapter"] == pytest.approx(ratio, rel=1e-2) and row["prefix_once_over_copied"] > 0
    assert result["min_ratio"] == min(row["ratio_base"], row["ratio_adapter"])
