"""One rule for an answer the verifier never judged (``None``): out of the numerator and the
denominator of every figure, counted beside as ``unjudged`` (issue 58, item 2).

On 86f3fbc ``stats`` had no :func:`judged` and read ``None`` as a wrong answer everywhere.
"""

from __future__ import annotations

import pytest

from agon_env import stats


def test_judged_keeps_the_verdicts_in_order_and_counts_the_rest():
    assert stats.judged([True, None, False, None]) == ([True, False], 2)


def test_a_rate_leaves_unjudged_outcomes_out_of_both_counts():
    r = stats.rate([True, None, False, None])
    assert (r.successes, r.trials, r.unjudged, r.rate) == (1, 2, 2, 0.5)  # 86f3fbc: 1 of 4
    assert (r.low, r.high) == stats.clopper_pearson(1, 2)
    assert r.to_dict()["unjudged"] == 2
    pooled = stats.pooled([r, stats.rate([True])])
    assert (pooled.successes, pooled.trials, pooled.unjudged) == (2, 3, 2)


def test_conversion_counts_only_drafts_judged_wrong_and_fixes_judged():
    first = [None, False, False, True, False]
    second = [True, None, True, False, False]
    c = stats.conversion(first, second)
    # an unjudged draft is not known wrong; a wrong draft's unjudged fix is not known fixed
    assert (c.successes, c.trials, c.unjudged) == (1, 2, 2)  # 86f3fbc: 2 of 4


def test_complementarity_counts_pairs_with_both_sides_judged():
    c = stats.complementarity([False, None, True, False], [False, False, None, True])
    assert (c.n, c.both_wrong, c.a_only_wrong, c.both_right, c.unjudged) == (2, 1, 1, 0, 2)


def test_pass_at_k_and_the_cluster_bootstrap_read_judged_samples_only():
    per_problem = [[True, None], [None, None], [False, False]]
    assert stats.problem_counts(per_problem) == [(1, 1), (2, 0)]
    assert stats.pass_at_k_table(stats.problem_counts(per_problem)) == {1: 0.5}
    assert stats.cluster_bootstrap(per_problem) == stats.cluster_bootstrap([[True], [False, False]])


def test_the_paired_bootstrap_leaves_a_cell_unjudged_on_either_side_out():
    d = stats.paired_bootstrap([[1, None, 0, 1]], [[0, 1, None, 1]])
    same = stats.paired_bootstrap([[1, 1]], [[0, 1]])
    assert (d.mean, d.low, d.high) == pytest.approx((same.mean, same.low, same.high), abs=0.1)
    assert d.mean == 0.5
    with pytest.raises(ValueError, match="no cell judged"):
        stats.paired_bootstrap([[None]], [[1]])


def test_every_outcome_judged_reads_as_before():
    outcomes = [[1, 0, 1, 1, 0], [0, 0, 1, 1, 1]]
    d = stats.paired_bootstrap(outcomes, [[0] * 5, [1] * 5])
    assert d.mean == pytest.approx(0.1)
    assert stats.rate([True, False, True]).unjudged == 0
