"""The accuracy-vs-length figure draws the same interval as the eval tables."""

from __future__ import annotations

from typing import Any

import pytest

from agon_env.evaluation import tradeoff
from agon_env.evaluation.report import _ci, _method_ci
from agon_env.stats import cluster_bootstrap, pooled, rate

# outcomes[seed][problem]: 3 seeds x 6 problems; problems 0-1 always right, 4-5 never.
OUTCOMES = [
    [1, 1, 1, 0, 0, 0],
    [1, 1, 0, 1, 0, 0],
    [1, 1, 1, 1, 0, 0],
]


def _method() -> dict[str, Any]:
    per_problem = [[bool(s[p]) for s in OUTCOMES] for p in range(6)]
    low, high = cluster_bootstrap(per_problem)
    return {
        "family": "standalone",
        "mean_length": 12.0,
        "length_unit": "tokens",
        "pass@1": pooled([rate([bool(x) for x in s]) for s in OUTCOMES]).to_dict(),
        "pass@1_clustered": {"low": low, "high": high},
    }


def _drawn(monkeypatch: pytest.MonkeyPatch, report: dict[str, Any], tmp_path) -> tuple[float, float]:
    figs: list[Any] = []
    monkeypatch.setattr(tradeoff, "save", lambda fig, path: figs.append(fig) or path)
    tradeoff.plot_accuracy_vs_length([("run", report)], tmp_path)
    (ax,) = [a for a in figs[0].axes if a.containers]
    ((_, lo), (_, hi)) = ax.containers[0].lines[2][0].get_segments()[0]
    return lo, hi


@pytest.mark.parametrize("seeds", [[0, 1, 2], [0]])
def test_figure_interval_is_the_tables(monkeypatch, tmp_path, seeds):
    m = _method()
    report = {
        "seeds": seeds,
        "confidence": 0.95,
        "runs": [{"label": "run", "methods": {"standalone:agent_a": m}}],
    }
    lo, hi = _drawn(monkeypatch, report, tmp_path)
    many = len(seeds) > 1
    assert _ci({"low": lo, "high": hi}) == _method_ci(m, many)  # the table's cell, to its printed digits
    expected = m["pass@1_clustered"] if many else m["pass@1"]
    assert (lo, hi) == pytest.approx((expected["low"], expected["high"]))
    # The two intervals differ on this matrix, so the check tells them apart.
    assert abs(m["pass@1"]["low"] - m["pass@1_clustered"]["low"]) > 0.01
