"""What goes wrong in a run says so in one line, and nothing hangs: scorers, disks, idle runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
TINY = [
    "--model", "tiny", "--batch-problems", "1", "--grpo.num-generations", "2",
    "--sampling.max-new-tokens", "8", "--heldout-problems", "0", "--no-progress", "--threads", "1",
]  # fmt: skip


def agon(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m agon_env.cli ARGS`` with this folder's test envs importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "agon_env.cli", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_agon_train_returns_and_reports_a_score_that_never_returns(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = agon(
        "train", *TINY, "--steps", "2", "--imports", "hang_env", "--env", "test/hanging-scorer-v0",
        "--out-dir", str(run), timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "did not return within its wall-clock limit" in r.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(rec["score_timeouts"] == 4 for rec in records)  # 2 rollouts x 2 turns
    assert "score_timeouts" in r.stdout  # the summary table shows the count
