"""benchmarks/mixed_forward_bench.py runs on the tiny model and ends with its JSON line."""

from __future__ import annotations

from bench_run import last_json


def test_mixed_forward_bench_weighs_mixing_against_merged_and_separate_batches() -> None:
    flags = ["--model", "tiny", "--batch", "4", "--reps", "1", "--max-new-tokens", "6"]
    result = last_json("mixed_forward_bench.py", *flags)
    assert result["bench"] == "mixed_forward"
    assert set(result["tok_s"]) == {"merged", "mixed", "separate"}
    assert all(v > 0 for v in result["tok_s"].values())
    assert result["mixed_over_merged"] > 0 and result["mixed_over_separate"] > 0
    # rows decoded among the other adapter's rows sample what they sample in their own batch
    assert result["same_tokens"] is True and 0 <= result["largest_logprob_difference"] < 1e-3
