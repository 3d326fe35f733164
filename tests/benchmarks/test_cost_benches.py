"""Issue #23's third-round benchmark runs end to end on the tiny model, ending with a JSON line."""

from __future__ import annotations

from bench_run import last_json


def test_challenger_prompt_bench_renders_fewer_worked_challenges_as_shorter_prompts() -> None:
    flags = ["--model", "tiny", "--batches", "3", "--max-new-tokens", "4", "--threads", "1"]
    result = last_json("challenger_prompt_bench.py", *flags)
    row = result["results"]["3"]
    assert row["2"]["prompt_tokens"] > row["1"]["prompt_tokens"] > row["0"]["prompt_tokens"]
    assert row["2"]["turn_time_over_two_examples"] == 1.0 and row["0"]["turn_time_over_two_examples"] > 0
