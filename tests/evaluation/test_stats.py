import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agon_env import stats
from agon_env.stats import (
    clopper_pearson,
    complementarity,
    conversion,
    length_stats,
    mean_pass_at_k,
    newcombe_interval,
    paired_bootstrap,
    pass_at_k,
    pass_at_k_table,
    pooled,
    rate,
    smoothed,
    spread,
    verdict_of,
    welch_interval,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("x", "n", "low", "high"),
    [
        (0, 10, 0.0, 0.3085),  # = 1 - 0.025 ** (1/10)
        (5, 10, 0.1871, 0.8129),
        (10, 10, 0.6915, 1.0),
        (1, 1, 0.025, 1.0),
        (50, 100, 0.3983, 0.6017),
        (150, 300, 0.4420, 0.5580),  # the paper's 300 problems: ±5.6 pp at 50%
    ],
)
def test_clopper_pearson_known_values(x, n, low, high):
    lo, hi = clopper_pearson(x, n)
    assert lo == pytest.approx(low, abs=1e-4)
    assert hi == pytest.approx(high, abs=1e-4)


def test_clopper_pearson_edges_and_errors():
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    assert clopper_pearson(0, 10)[1] == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)
    lo90, hi90 = clopper_pearson(5, 10, confidence=0.90)
    lo95, hi95 = clopper_pearson(5, 10)
    assert lo95 < lo90 < 0.5 < hi90 < hi95
    for bad in ((11, 10), (-1, 10)):
        with pytest.raises(ValueError):
            clopper_pearson(*bad)
    with pytest.raises(ValueError):
        clopper_pearson(1, 2, confidence=1.0)


@given(st.integers(0, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_clopper_pearson_contains_the_estimate(xn):
    x, n = xn
    lo, hi = clopper_pearson(x, n)
    p = x / n if n else 0.5
    assert 0.0 <= lo <= p <= hi <= 1.0


def test_pass_at_k_hand_computed():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # only one wrong sample: any pair has a right one
    assert mean_pass_at_k([(5, 2), (10, 3)], 1) == pytest.approx((0.4 + 0.3) / 2)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        mean_pass_at_k([], 1)


@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_binomial_formula(nck):
    n, c, k = nck
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


def test_pass_at_k_table_ks():
    table = pass_at_k_table([(6, 1), (6, 3)])
    assert sorted(table) == [1, 2, 4, 6]
    assert table[1] == pytest.approx((1 / 6 + 3 / 6) / 2)
    assert pass_at_k_table([(1, 1)]) == {1: 1.0}
    assert pass_at_k_table([]) == {}


def test_rate_and_pooled():
    r = rate([True] * 5 + [False] * 5)
    assert (r.successes, r.trials, r.rate) == (5, 10, 0.5)
    assert (round(r.low, 4), round(r.high, 4)) == (0.1871, 0.8129)
    p = pooled([r, rate([True] * 45 + [False] * 45)])
    assert (p.successes, p.trials) == (50, 100)
    assert p.high - p.low < r.high - r.low
    assert rate([]).rate is None and rate([]).to_dict()["rate"] is None


def test_length_stats_ignores_unknown_lengths():
    s = length_stats([10, None, 20, 60])
    assert (s.mean, s.median, s.count) == (30.0, 20.0, 3)
    assert length_stats([None]).mean is None


def test_spread_across_seeds():
    s = spread([0.5, 0.6, 0.7])
    assert s.mean == pytest.approx(0.6) and s.std == pytest.approx(0.1)
    assert spread([0.4]).std == 0.0
    assert spread([None]).mean is None


def test_complementarity_counts_and_jaccard():
    a = [True, False, False, True, False]
    b = [True, False, True, False, True]
    c = complementarity(a, b)
    assert (c.both_wrong, c.a_only_wrong, c.b_only_wrong, c.both_right) == (1, 2, 1, 1)
    assert c.exactly_one_wrong == 3
    assert c.jaccard == pytest.approx(1 / 4)  # fail(a)={1,2,4}, fail(b)={1,3}
    assert c.both_wrong_rate == pytest.approx(0.2)
    assert complementarity([True], [True]).jaccard is None
    assert complementarity([False, True], [False, True]).jaccard == 1.0
    with pytest.raises(ValueError):
        complementarity([True], [True, False])


def test_conversion_is_conditional_on_a_wrong_first():
    first = [False, False, False, True, True]
    second = [True, False, True, False, True]
    r = conversion(first, second)
    assert (r.successes, r.trials) == (2, 3)
    assert conversion([True], [False]).rate is None


def test_paired_bootstrap_hand_computed():
    # d = [1, 1, 0, 0]: a resample's mean is k/4 with k ~ Binomial(4, 1/2); P(k=0) = 1/16 > 2.5%,
    # so the 95% percentile interval is [0, 1] around the mean 0.5.
    d = paired_bootstrap([[1, 1, 0, 0]], [[0, 0, 0, 0]])
    assert (d.mean, d.low, d.high, d.seeds, d.problems) == (0.5, 0.0, 1.0, 1, 4)
    # Identical outcomes: every resample differs by exactly 0, whatever the problems' difficulty.
    same = paired_bootstrap([[1, 0, 1], [0, 0, 1]], [[1, 0, 1], [0, 0, 1]])
    assert (same.mean, same.low, same.high) == (0.0, 0.0, 0.0)
    # A constant shift of 1 on every (seed, problem): the interval collapses onto it.
    assert paired_bootstrap([[1, 1], [1, 1]], [[0, 0], [0, 0]]).to_dict() == {
        "mean": 1.0,
        "low": 1.0,
        "high": 1.0,
        "seeds": 2,
        "problems": 2,
    }
    with pytest.raises(ValueError, match="equal non-empty"):
        paired_bootstrap([[1, 0]], [[1]])


def test_paired_bootstrap_resamples_seeds_too():
    # Seed 0 helps on every problem, seed 1 hurts on every problem: the mean is 0 but which
    # seeds a replicate draws moves it, so the interval spans that seed-to-seed spread.
    d = paired_bootstrap([[1] * 20, [0] * 20], [[0] * 20, [1] * 20])
    assert d.mean == 0.0 and d.low == -1.0 and d.high == 1.0


@settings(deadline=None)  # two bootstraps per example: over 200 ms on a loaded machine
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=30))
def test_paired_bootstrap_interval_holds_the_mean_and_is_antisymmetric(pairs):
    x, y = [[int(a) for a, _ in pairs]], [[int(b) for _, b in pairs]]
    d, r = paired_bootstrap(x, y), paired_bootstrap(y, x)
    assert -1 <= d.low <= d.high <= 1 and d.mean == pytest.approx(-r.mean)
    assert d.low == pytest.approx(-r.high) and d.high == pytest.approx(-r.low)


def test_welch_interval_hand_computed():
    # x = [2, 4]: mean 3, var 2, se² = 1; y constant 1: se² = 0 -> df = 1, t(0.975, 1) = 12.706.
    lo, hi = welch_interval([2, 4], [1, 1, 1, 1])
    assert lo == pytest.approx(2 - 12.7062, abs=1e-3) and hi == pytest.approx(2 + 12.7062, abs=1e-3)
    # Equal sizes and variances: df = 2n - 2 = 4, se = sqrt(1/3 + 1/3); t(0.975, 4) = 2.7764.
    lo, hi = welch_interval([1, 2, 3], [0, 1, 2])
    assert (hi - lo) / 2 == pytest.approx(2.7764 * math.sqrt(2 / 3), abs=1e-3) and (lo + hi) / 2 == 1
    assert welch_interval([1], [1, 2]) is None
    assert welch_interval([1, 1], [0, 0]) == (1, 1)


def test_verdicts():
    assert verdict_of(0.01, 0.2, "up", "down") == "up" and verdict_of(-0.2, -0.01, "up", "down") == "down"
    assert verdict_of(-0.1, 0.2, "up", "down") == "within noise"
    assert verdict_of(0, 0, "up", "down") == "no change"
    assert verdict_of(-0.658, 0.658, "up", "down", same=True) == "no change"  # a rate at 0 on both sides


def test_smoothed_is_a_centred_mean_with_its_band():
    m, lo, hi = smoothed([0, 1, 2, 3, None], 3)
    assert m[:4] == [0.5, 1, 2, 2.5] and math.isnan(m[4]) is False and m[4] == 3
    half = 1.96 / math.sqrt(3)  # window [1, 2, 3]: sd 1, three values
    assert lo[2] == pytest.approx(2 - half) and hi[2] == pytest.approx(2 + half)
    assert math.isnan(lo[4]) and math.isnan(hi[4])  # one value: its spread is unknown, so no band


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    # Newcombe (1998a), "Two-sided confidence intervals for the single proportion", Table I, Wilson.
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_wilson_matches_newcombe_1998a(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2", "low", "high"),
    # Newcombe (1998b), "Interval estimation for the difference between independent proportions",
    # Table II, method 10 (the hybrid score interval): examples (a), (b), (d)-(h).
    [
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        (5, 56, 0, 29, -0.0381, 0.1926),
        (0, 10, 0, 20, -0.1611, 0.2775),
        (0, 10, 0, 10, -0.2775, 0.2775),
        (10, 10, 0, 20, 0.6791, 1.0),
        (10, 10, 0, 10, 0.6075, 1.0),
    ],
)
def test_newcombe_matches_the_worked_examples(x1, n1, x2, n2, low, high):
    lo, hi = newcombe_interval(x1, n1, x2, n2)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def test_newcombe_needs_trials_on_both_sides():
    assert newcombe_interval(3, 4, 0, 0) is None and newcombe_interval(0, 0, 1, 2) is None


_counts = st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@settings(deadline=None)  # scipy's first call is slow on a loaded machine
@given(_counts, _counts, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_newcombe_stays_in_bounds_and_holds_the_estimate(a, b, confidence):
    (x1, n1), (x2, n2) = a, b
    lo, hi = newcombe_interval(x1, n1, x2, n2, confidence)
    d = x1 / n1 - x2 / n2
    assert -1 <= lo <= d + 1e-12 and d - 1e-12 <= hi <= 1
    assert lo < hi  # never a point: even n/n against 0/n leaves room below +1
    lo2, hi2 = newcombe_interval(x2, n2, x1, n1, confidence)  # swapping the sides mirrors it
    assert math.isclose(lo2, -hi, abs_tol=1e-12) and math.isclose(hi2, -lo, abs_tol=1e-12)


def test_a_t_interval_stays_in_its_metrics_range_and_the_report_says_one_df():
    """Issue #46: two runs at 100 % and 0 % gave [−585.3, +685.3] pp across runs."""
    from agon_env.evaluation.report import _spread_row, _t_ci

    raw = stats.t_interval([1.0, 0.0])
    assert raw is not None and raw[0] < -5 and raw[1] > 6  # t₀.₉₇₅ with 1 df is 12.71
    assert stats.t_interval([1.0, 0.0], bounds=(0.0, 1.0)) == (0.0, 1.0)
    assert stats.t_interval([0.6, 0.5, 0.7], bounds=(-1.0, 1.0)) == stats.t_interval([0.6, 0.5, 0.7])
    rate = {"rate": 1.0, "successes": 4, "trials": 4, "low": 0.4, "high": 1.0}
    method = {"pass@1": rate, "mean_length": 10.0}
    row = _spread_row([method, {**method, "pass@1": {**rate, "rate": 0.0, "successes": 0}}], 0.95)
    assert row["pass@1_t_interval"] == {"low": 0.0, "high": 1.0}
    assert _t_ci(row["pass@1_t_interval"], 2).endswith("(1 df)") and "(1 df)" not in _t_ci(
        {"low": 0, "high": 1}, 3
    )


def test_the_fewest_discordant_pairs_a_sign_test_can_reject_on_and_the_detectable_difference():
    assert stats.least_discordant(0.95) == 6 and stats.least_discordant(0.99) == 8  # 2·0.5⁶ = 0.031 < 0.05
    # (1.96 + 0.84) · √(2 · 0.3 · 0.7 / 400) = 0.0907
    assert stats.detectable_difference(400, 0.3) == pytest.approx(0.0907, abs=1e-3)
    assert stats.detectable_difference(1, 0.5) == 1.0 and stats.detectable_difference(0, 0.5) == 1.0


def test_fisher_greater_is_the_one_sided_exact_tail() -> None:
    from agon_env.stats import fisher_greater

    assert fisher_greater(8, 8, 0, 8) == pytest.approx(1 / 12870)  # the one table as extreme: 1 / C(16, 8)
    # 2 of 4 against 0 of 4: tables with 2 bad after, of C(8, 2) = 28 ways, C(4, 2) = 6 put both after.
    assert fisher_greater(2, 4, 0, 4) == pytest.approx(6 / 28)
    assert fisher_greater(0, 5, 5, 5) == 1.0 and fisher_greater(0, 0, 0, 0) == 1.0
    with pytest.raises(ValueError, match="0 <= bad <= n"):
        fisher_greater(3, 2, 0, 1)
