"""benchmarks/packed_head_bench.py runs on the tiny model and ends with its JSON line."""

from __future__ import annotations

import pytest
import torch
from bench_run import last_json

from agon_env.agents import packed_head


@pytest.mark.skipif(not packed_head.packable(torch.nn.Linear(4, 4)), reason="this torch has no oneDNN linear")
def test_packed_head_bench_times_both_ways_at_every_row_count() -> None:
    result = last_json("packed_head_bench.py", "--model", "tiny", "--rows", "1", "3", "8", "--reps", "2")
    assert result["bench"] == "packed_head" and set(result["rows"]) == {"1", "3", "8"}
    for row in result["rows"].values():
        assert row["linear_ms"] > 0 and row["packed_ms"] > 0 and row["linear_over_packed"] > 0
        assert 0 <= row["largest_logit_difference"] < 1e-3
    assert result["rows_alike"] is True
