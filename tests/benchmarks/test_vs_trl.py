"""benchmarks/vs_trl.py at its smallest size: our GRPO and TRL's on the tiny model, both recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # ~45 s: TRL's import and trainer set-up dominate even two tiny steps
def test_vs_trl_runs_both_trainers_on_one_workload(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    workload = ["--model", "tiny", "--steps", "2", "--batch-problems", "1", "--num-generations", "2"]
    workload += ["--micro-batch", "2", "--max-new-tokens", "4", "--threads", "1"]
    flags = [*workload, "--trl-grad-ckpt", "off", "--no-agon", "--scratch", str(tmp_path)]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "vs_trl.py"), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["workload"]["model"] == "tiny" and result["workload"]["steps"] == 2
    ours, trl = result["runs"]["ours_grpo"], result["runs"]["trl"]
    assert len(ours["step_times"]) == len(trl["step_times"]) == 2  # both trained the same steps
    assert result["ratios"]["grpo_step_ratio"] == ours["step_s_mean"] / trl["step_s_mean"]
    assert result["ratios"]["peak_rss_ratio"] == ours["peak_rss_mb"] / trl["peak_rss_mb"]
    assert set(result["goals_met"]) == {"grpo_step_ratio", "peak_rss_ratio"}
