"""benchmarks/serve_bench.py runs end to end on the tiny model and keeps its last line a JSON object."""

from __future__ import annotations

import pytest
from bench_run import last_json


def test_serve_bench_reports_latency_ttft_and_the_overhead_over_the_raw_engine() -> None:
    flags = ["--model", "tiny", "--requests", "4", "--max-new-tokens", "8", "--threads", "1"]
    result = last_json("serve_bench.py", *flags)
    served, raw = result["served"], result["raw"]
    assert result["bench"] == "serve" and result["requests"] == 4 and result["engine"] == "hf"
    # Every request streamed its draft before its end; both ways generated within the budget.
    assert 0 < served["ttft_p50"] <= served["latency_p50"] <= served["latency_p95"]
    assert 0 < served["completion_tokens"] <= 4 * 2 * 8 and 0 < raw["completion_tokens"] <= 4 * 2 * 8
    assert result["served_over_raw"] == served["seconds"] / raw["seconds"] > 0
    assert result["served_over_raw_per_token"] > 0
    # the burst's batches as the server's /health counted them: each request is a cascade of two
    # stages, each stage one prefill that arrivals may share: 2 to 8 prefills, none over 4 requests
    # (on a loaded machine the four drafts can arrive one step apart, so the count varies from 2 to 8)
    assert 2 <= served["batches"] <= 4 * 2 and 1 <= served["largest_batch"] <= 4
    # ... and the server's engine counted the same prefills, with decode steps of its own
    assert served["engine"]["prefills"] == served["batches"] and served["engine"]["steps"] > 0


def test_serve_bench_threaded_runs_the_served_shape_without_http_with_the_engine_counts() -> None:
    flags = ["--model", "tiny", "--requests", "4", "--max-new-tokens", "8", "--threads", "1"]
    result = last_json("serve_bench.py", *flags, "--threaded", "--spread-s", "0.2", "--ride-ab", "--alone")
    raw, threaded, separate = result["raw"], result["threaded"], result["threaded_separate"]
    assert result["threaded_over_raw"] == threaded["seconds"] / raw["seconds"] > 0
    for counts in (raw["engine"], threaded["engine"]):
        # a step runs one decode forward (every adapter's rows in it); every stage prefilled
        assert 0 < counts["forwards"] <= counts["steps"] and counts["mixed_forwards"] <= counts["forwards"]
        assert 1 <= counts["prefills"] <= 4 * 2
    assert raw["engine"]["prefills"] == 2  # one call: the drafts, then the answers
    assert 0 < threaded["completion_tokens"] <= 4 * 2 * 8
    # --ride-ab: the same shape again, no arrival riding a decode forward
    assert raw["engine"]["rode"] == 0 == separate["engine"]["rode"] <= threaded["engine"]["rode"]
    assert threaded["engine"]["rode"] <= threaded["engine"]["prefills"]
    assert result["ride_over_separate"] == threaded["seconds"] / separate["seconds"] > 0
    # --alone: each question alone, and the latest a request sent 0.2 s apart could end at that pace
    alone = result["alone"]
    assert len(alone["seconds"]) == 4 and all(t > 0 for t in alone["seconds"])
    want = max(i * 0.2 / 3 + t for i, t in enumerate(alone["seconds"]))
    assert alone["bound_s"] == pytest.approx(want) and alone["bound_s"] >= max(alone["seconds"])
    assert result["alone_bound_over_raw"] == alone["bound_s"] / raw["seconds"]
    assert "alone" not in raw


def test_serve_bench_reps_pairs_raw_and_served_runs_in_alternating_order_with_their_medians() -> None:
    flags = ["--model", "tiny", "--requests", "3", "--max-new-tokens", "6", "--threads", "1"]
    result = last_json("serve_bench.py", *flags, "--reps", "3", "--threaded")
    runs = result["runs"]
    assert result["reps"] == 3 and [r["order"] for r in runs] == ["raw, served", "served, raw", "raw, served"]
    for r in runs:
        assert r["served_over_raw"] == r["served"]["seconds"] / r["raw"]["seconds"] > 0
        assert r["raw"]["engine"]["prefills"] == 2 and "threaded" not in r["raw"]
    # the top level is the first pair's, as with one rep; the extras ran in its raw run
    assert result["served_over_raw"] == runs[0]["served_over_raw"] and "threaded" in result
    ratios = sorted(r["served_over_raw"] for r in runs)
    assert result["median"]["served_over_raw"] == ratios[1]
    spreads = sorted(r["served"]["latency_p95"] / r["served"]["latency_p50"] for r in runs)
    assert result["median"]["p95_over_p50"] == spreads[1] >= 1
