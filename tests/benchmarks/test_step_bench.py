"""benchmarks/step_bench.py runs end to end on the tiny model and keeps its last line a JSON object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_step_bench_reports_each_ratio_and_each_lever(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "step_bench.py"),
        "--model",
        "tiny",
        "--reps",
        "1",
        "--threads",
        "1",
        "--scratch",
        str(tmp_path),
        "--lever",
        "grpo.micro_batch_tokens=64",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["agon_over_grpo"] > 0 and result["agon_peak_over_grpo_peak"] > 0
    assert result["workload"]["model"] == "tiny" and result["workload"]["steps"] == 2
    lever = result["levers"]["grpo.micro_batch_tokens=64"]
    assert lever["step_over_agon"] > 0 and lever["peak_over_agon"] > 0
    # The lever run is its own folder with that key in its config: the flag reached `agon train`.
    config = (tmp_path / "agon-grpo.micro_batch_tokens=64" / "config.yaml").read_text()
    assert "micro_batch_tokens: 64" in config
