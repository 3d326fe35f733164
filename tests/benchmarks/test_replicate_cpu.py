"""``benchmarks/replicate_cpu.py --quick`` end to end: calibrate, train 3 arms, eval, table, figure.

Runs on the tiny random model with the smallest sizes so every stage executes (the numbers
are meaningless; the pipeline is what is tested). A few minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "replicate_cpu.py"


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_quick_replication_runs_the_whole_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--quick",
        "--model", "tiny",
        "--difficulty", "1",
        "--steps", "2",
        "--calibration-problems", "4",
        "--test-problems", "4",
        "--val-problems", "2",
        "--max-new-tokens", "8",
        "--threads", "1",
        "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["bench"] == "replicate_cpu"
    assert result["difficulty"] == 1
    assert set(result["summary"]["arms"]) == {"grpo", "coop", "agon"}
    # One adapter: no cascade; two adapters: the cascade reported is the one chosen on validation.
    assert "cascade" not in result["summary"]["arms"]["grpo"]
    for arm in ("coop", "agon"):
        row = result["summary"]["arms"][arm]
        assert row["cascade"]["pass@1"]["trials"] == 4
        assert all(c is not None for c in row["chosen"])
    assert result["summary"]["base"]["zero-shot"]["pass@1"]["trials"] == 4

    table = (out / "replication.md").read_text()
    for arm in ("grpo", "coop", "agon"):
        assert f"| {arm} | standalone" in table
    assert "cascade, direction chosen on validation" in table
    assert (out / "plots" / "accuracy_vs_length.png").stat().st_size > 0
    for arm in ("grpo", "coop", "agon"):
        assert (out / "runs" / f"{arm}-seed0" / "adapters").is_dir()
        assert (out / "eval" / arm / "eval.json").is_file()

    # Re-running the same command reuses every finished stage instead of redoing it.
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "finished earlier, kept" in again.stdout
    assert not any(
        k.startswith(("train-", "eval-", "calibrate-"))
        for k in json.loads(again.stdout.strip().splitlines()[-1])["stage_seconds"]
    )
