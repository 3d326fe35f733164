"""benchmarks/decode_levers_bench.py runs on the tiny model and ends with its JSON line."""

from __future__ import annotations

from bench_run import last_json


def test_decode_levers_bench_weighs_the_four_combinations_and_checks_their_tokens() -> None:
    flags = ["--model", "tiny", "--batch", "3", "--reps", "1", "--max-new-tokens", "6"]
    result = last_json("decode_levers_bench.py", *flags)
    assert result["bench"] == "decode_levers"
    assert set(result["tok_s"]) == {"neither", "nucleus", "layout", "both"}
    assert all(v > 0 for v in result["tok_s"].values())
    # the nucleus is exact: its tokens are the full sort's, always
    assert result["same_tokens"]["nucleus"] is True and result["same_tokens"]["neither"] is True
    drift = result["largest_logprob_difference"]
    assert drift["nucleus"] == 0.0 == drift["neither"] and drift["layout"] >= 0
    assert result["both_over_neither"] > 0 and result["nucleus_over_neither"] > 0
