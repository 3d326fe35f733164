"""benchmarks/vllm_start_bench.py at its smallest: one setting (the engine in-process), a tiny model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_vllm_start_bench_times_a_backend_start(vllm_interpreter) -> None:
    cmd = [vllm_interpreter, str(ROOT / "benchmarks" / "vllm_start_bench.py"), "--settings", "in_process"]
    cmd += ["--model", "tiny-qwen3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["bench"] == "vllm_start" and set(result) == {"bench", "in_process"}
    assert all(result["in_process"][k] > 0 for k in ("start_s", "generate_s", "close_s"))
