"""benchmarks/decode_levers_bench.py runs on the tiny model and ends with its JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_decode_levers_bench_weighs_the_four_combinations_and_checks_their_tokens() -> None:
    flags = ["--model", "tiny", "--batch", "3", "--reps", "1", "--max-new-tokens", "6"]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "decode_levers_bench.py"), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["bench"] == "decode_levers"
    assert set(result["tok_s"]) == {"neither", "nucleus", "layout", "both"}
    assert all(v > 0 for v in result["tok_s"].values())
    # the nucleus is exact: its tokens are the full sort's, always
    assert result["same_tokens"]["nucleus"] is True and result["same_tokens"]["neither"] is True
    drift = result["largest_logprob_difference"]
    assert drift["nucleus"] == 0.0 == drift["neither"] and drift["layout"] >= 0
    assert result["both_over_neither"] > 0 and result["nucleus_over_neither"] > 0
