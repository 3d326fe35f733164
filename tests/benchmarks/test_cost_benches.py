"""Issue #23's third-round benchmarks run end to end on the tiny model, each ending with a JSON line."""

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


def test_eval_bench_times_both_sampling_paths_and_finds_the_same_outcomes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train = [sys.executable, "-m", "agon_env.cli", "train", "--model", "tiny", "--steps", "1",
             "--heldout-problems", "0", "--time-budget-min", "0", "--no-progress",
             "--out-dir", str(run)]  # fmt: skip
    assert subprocess.run(train, capture_output=True, timeout=600, cwd=ROOT).returncode == 0
    result = _last_json([sys.executable, str(BENCH / "eval_bench.py"), str(run), "--threads", "1", "--",
                         "--problems", "4", "--val-problems", "2", "--max-new-tokens", "6",
                         "--methods", "standalone", "cascade"])  # fmt: skip
    assert result["new_over_old"] > 0 and set(result["seconds"]) == {"new", "old"}
    assert set(result["outcomes_agree"]) == {
        "standalone:agent_a",
        "standalone:agent_b",
        "cascade:agent_a>agent_b",
        "cascade:agent_b>agent_a",
    }
    assert result["outcomes_equal"]  # the tiny model's samples: identical on both paths


def test_challenger_prompt_bench_renders_fewer_worked_challenges_as_shorter_prompts() -> None:
    result = _last_json([sys.executable, str(BENCH / "challenger_prompt_bench.py"), "--model", "tiny",
                         "--batches", "3", "--max-new-tokens", "4", "--threads", "1"])  # fmt: skip
    row = result["results"]["3"]
    assert row["2"]["prompt_tokens"] > row["1"]["prompt_tokens"] > row["0"]["prompt_tokens"]
    assert row["2"]["turn_time_over_two_examples"] == 1.0 and row["0"]["turn_time_over_two_examples"] > 0
