"""benchmarks/cascade_bench.py runs end to end on the tiny model and keeps its last line a JSON object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cascade_bench_reports_both_ratios_and_the_lever() -> None:
    flags = [
        "--model",
        "tiny",
        "--questions",
        "3",
        "--singles",
        "1",
        "--reps",
        "1",
        "--max-new-tokens",
        "8",
        "--threads",
        "1",
    ]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "cascade_bench.py"), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["model"] == "tiny" and result["questions"] == 3
    assert set(result["seconds_batch"]) == {"alone", "cascade", "cascade_early"}
    assert result["cascade_over_alone_batch"] > 0 and result["early_over_full_batch"] > 0
    assert (
        0 < result["tokens"]["cascade_draft"] <= 8
        and result["tokens"]["alone"] == result["tokens"]["cascade_draft"]
    )
    assert result["shown_identical"] == 3  # what the challenger read, with and without the lever
