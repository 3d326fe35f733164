"""Issue #23's third-round benchmark runs end to end on the tiny model, ending with a JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _last_json(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_challenger_prompt_bench_renders_fewer_worked_challenges_as_shorter_prompts() -> None:
    result = _last_json(
        [
            sys.executable,
            str(BENCH / "challenger_prompt_bench.py"),
            "--model",
            "tiny",
            "--batches",
            "3",
            "--max-new-tokens",
            "4",
            "--threads",
            "1",
        ]
    )
    row = result["results"]["3"]
    assert row["2"]["prompt_tokens"] > row["1"]["prompt_tokens"] > row["0"]["prompt_tokens"]
    assert row["2"]["turn_time_over_two_examples"] == 1.0 and row["0"]["turn_time_over_two_examples"] > 0
