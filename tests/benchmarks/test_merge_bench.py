"""benchmarks/merge_bench.py runs on the tiny model and ends with its JSON line."""

from __future__ import annotations

import pytest
from bench_run import last_json


@pytest.mark.parametrize("fresh", [False, True])
def test_merge_bench_times_both_merges_of_every_layer(fresh: bool) -> None:
    result = last_json("merge_bench.py", "--model", "tiny", "--reps", "2", *(["--fresh"] if fresh else []))
    assert result["bench"] == "merge" and result["layers"] > 0 and result["fresh_buffers"] is fresh
    assert result["peft_ms"] > 0 and result["addmm_ms"] > 0 and result["peft_over_addmm"] > 0
    assert 0 <= result["largest_difference"] < 1e-5
