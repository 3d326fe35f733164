"""benchmarks/decode_levers_bench.py runs on the tiny model and ends with its JSON line."""

from __future__ import annotations

from bench_run import last_json


def test_decode_levers_bench_weighs_each_lever_and_all_and_checks_their_tokens() -> None:
    flags = ["--model", "tiny", "--batch", "3", "--reps", "1", "--max-new-tokens", "6"]
    result = last_json("decode_levers_bench.py", *flags)
    assert result["bench"] == "decode_levers"
    levers = ("nucleus", "layout", "head", "linears")
    assert set(result["tok_s"]) == {"none", "all", *levers, *(f"all_but_{x}" for x in levers)}
    assert all(v > 0 for v in result["tok_s"].values())
    # the nucleus is exact: its tokens are the full sort's, always
    assert result["same_tokens"]["nucleus"] is True and result["same_tokens"]["none"] is True
    drift = result["largest_logprob_difference"]
    assert drift["nucleus"] == 0.0 == drift["none"] and all(drift[x] >= 0 for x in levers)
    assert all(result[f"{x}_over_none"] > 0 and result[f"{x}_in_all"] > 0 for x in levers)
    assert result["all_over_none"] > 0 and set(result["same_tokens"]) == set(result["tok_s"])
