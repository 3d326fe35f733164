"""benchmarks/sandbox_bench.py at its smallest size: latency, pool throughput and realistic checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agon_env.envs.tasks.data import local_file

ROOT = Path(__file__).resolve().parents[2]


def test_sandbox_bench_measures_and_every_reference_passes() -> None:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "sandbox_bench.py"), "--n", "2", "--workers", "1"]
    cmd += ["--resident-gb", "0.5"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["n"] == 2 and result["mode"] in ("bwrap", "fallback")
    assert result["sandbox_ms"] > 0 and result["plain_ms"] > 0 and result["trivial_checks_per_s"] > 0
    assert result["resident_gb"] == 0.5 and result["sandbox_ms_resident"] > 0
    assert result["resident_over_bare"] > 0
    assert result["humaneval_passed"] == "2/2"  # canonical solutions: a failure is a sandbox defect
    if local_file("codecontests_sample.jsonl") is not None:
        assert result["codecontests_passed"] == "2/2"
