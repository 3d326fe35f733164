"""Pure statistics for evaluation: accuracies with exact intervals, pass@k, lengths, overlap.

Every function here is a pure function of plain Python numbers and booleans, so the
numbers in a report can be recomputed from its per-problem records by hand.

* :func:`clopper_pearson` -- the exact binomial interval. The paper reports single-seed
  accuracies on 300 problems; an exact interval makes the ±5.5 pp visible next to each
  number instead of in a footnote.
* :func:`pass_at_k` -- the unbiased estimator of Chen et al. (2021), computed as a
  product so that it stays exact for large ``n`` where binomials overflow floats.
* :func:`complementarity` / :func:`conversion` -- whether two policies fail on different
  problems, and how often the second fixes the first; :func:`answer_agreement` -- how often
  their answers to the same problem differ at all.
* :func:`newcombe_interval` -- a change in a rate (end − start of a run) over pooled counts,
  from two :func:`wilson_interval` s: bounded by [−1, 1] where Welch's over a few per-step
  shares is not.
* :func:`smoothed` -- a centred moving mean of a per-step series and its 95 % band: the one
  smoother of every training curve.

**Unjudged outcomes.** An outcome is ``True`` (right), ``False`` (wrong) or ``None``: the task's
verifier gave no verdict (its ``score`` raised, returned a non-verdict, or timed out). An
unjudged answer is not a wrong one, so every figure here applies one rule, :func:`judged`: it
is left out of the numerator *and* the denominator and counted beside as ``unjudged``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from agon_env.json_value import JSONRecord

Outcome = bool | None
"""Right, wrong, or ``None``: not judged (the verifier gave no verdict)."""


def judged(outcomes: Iterable[Outcome]) -> tuple[list[bool], int]:
    """The one rule for unjudged outcomes: the judged ones in order, and how many were ``None``.

    Every rate, pooled rate, conversion, complementarity, pass@k and bootstrap here reads its
    outcomes through this, so an answer the verifier never judged is neither right nor wrong."""
    kept: list[bool] = []
    unjudged = 0
    for o in outcomes:
        if o is None:
            unjudged += 1
        else:
            kept.append(bool(o))
    return kept, unjudged


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact two-sided binomial interval for ``successes`` out of ``trials``.

    With no trials nothing is known, so the interval is the whole of [0, 1].
    """
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if trials == 0:
        return 0.0, 1.0
    from scipy.stats import beta as _beta  # imported here so `agon --help` stays fast

    alpha = 1.0 - confidence
    # The beta quantiles are undefined at the edges; the exact interval pins them to 0 and 1.
    low = 0.0 if successes == 0 else float(_beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(_beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


@dataclass(frozen=True)
class Rate:
    """A proportion with its exact interval. ``rate`` is None when there were no trials;
    ``unjudged`` outcomes (:func:`judged`) are in neither count."""

    successes: int
    trials: int
    low: float
    high: float
    unjudged: int = 0

    @property
    def rate(self) -> float | None:
        return self.successes / self.trials if self.trials else None

    def to_dict(self) -> JSONRecord:
        return {**asdict(self), "rate": self.rate}


def rate(outcomes: Iterable[Outcome], confidence: float = 0.95) -> Rate:
    """Fraction of True outcomes among the judged ones, with its Clopper–Pearson interval."""
    kept, unjudged = judged(outcomes)
    x, n = sum(kept), len(kept)
    return Rate(x, n, *clopper_pearson(x, n, confidence), unjudged=unjudged)


def pooled(rates: Sequence[Rate], confidence: float = 0.95) -> Rate:
    """One interval over several seeds or runs by summing their counts.

    This treats every trial as independent; repeated samples of the same problem are
    positively correlated, so with several seeds the pooled interval is somewhat too narrow.
    """
    x, n = sum(r.successes for r in rates), sum(r.trials for r in rates)
    return Rate(x, n, *clopper_pearson(x, n, confidence), unjudged=sum(r.unjudged for r in rates))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with ``c`` correct among ``n`` samples (Chen et al.).

    ``1 - C(n-c, k) / C(n, k)``, evaluated as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0  # every size-k subset contains a correct sample
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(per_problem: Sequence[tuple[int, int]], k: int) -> float:
    """pass@k averaged over problems, each given as ``(n_samples, n_correct)``."""
    if not per_problem:
        raise ValueError("pass@k over no problems is undefined")
    return statistics.fmean(pass_at_k(n, c, k) for n, c in per_problem)


def problem_counts(per_problem: Iterable[Iterable[Outcome]]) -> list[tuple[int, int]]:
    """Each problem's ``(judged samples, correct)`` for :func:`pass_at_k_table`: unjudged samples
    left out (:func:`judged`), a problem with none judged left out altogether."""
    out = []
    for outcomes in per_problem:
        kept, _ = judged(outcomes)
        if kept:
            out.append((len(kept), sum(kept)))
    return out


def pass_at_k_table(per_problem: Sequence[tuple[int, int]]) -> dict[int, float]:
    """pass@k for k = 1, 2, 4, ... up to the smallest per-problem sample count (always incl. that)."""
    if not per_problem:
        return {}
    n_min = min(n for n, _ in per_problem)
    ks = sorted({*(2**i for i in range(n_min.bit_length()) if 2**i <= n_min), n_min})
    return {k: mean_pass_at_k(per_problem, k) for k in ks}


@dataclass(frozen=True)
class LengthStats:
    mean: float | None
    median: float | None
    count: int


def length_stats(lengths: Sequence[float | int | None]) -> LengthStats:
    """Mean and median trace length; unknown lengths (None) are left out, not counted as 0."""
    known = [float(x) for x in lengths if x is not None]
    if not known:
        return LengthStats(None, None, 0)
    return LengthStats(statistics.fmean(known), float(statistics.median(known)), len(known))


@dataclass(frozen=True)
class Spread:
    """A statistic across seeds or runs: mean ± sample standard deviation."""

    mean: float | None
    std: float | None
    values: tuple[float, ...]


def spread(values: Sequence[float | None]) -> Spread:
    """Mean ± std (ddof=1) of the defined values; std is 0 for one value, None for none."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    if not vals:
        return Spread(None, None, ())
    std = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return Spread(statistics.fmean(vals), std, vals)


@dataclass(frozen=True)
class Complementarity:
    """How the failures of two policies on the same problems overlap.

    ``jaccard`` is |A∩B| / |A∪B| of the two failure sets: 1 means identical blind
    spots, 0 disjoint ones. It is None when neither policy failed anywhere. A pair with an
    unjudged side is in no count but ``unjudged`` (:func:`judged`).
    """

    n: int
    both_wrong: int
    exactly_one_wrong: int
    a_only_wrong: int
    b_only_wrong: int
    both_right: int
    jaccard: float | None
    unjudged: int = 0

    @property
    def both_wrong_rate(self) -> float | None:
        return self.both_wrong / self.n if self.n else None

    @property
    def exactly_one_wrong_rate(self) -> float | None:
        return self.exactly_one_wrong / self.n if self.n else None

    def to_dict(self) -> JSONRecord:
        return {
            **asdict(self),
            "both_wrong_rate": self.both_wrong_rate,
            "exactly_one_wrong_rate": self.exactly_one_wrong_rate,
        }


def _judged_pairs(a: Sequence[Outcome], b: Sequence[Outcome]) -> tuple[list[tuple[bool, bool]], int]:
    """Position-paired outcomes with both sides judged, and how many pairs had a side unjudged."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length: {len(a)} vs {len(b)}")
    pairs = [(bool(x), bool(y)) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return pairs, len(a) - len(pairs)


def complementarity(a_correct: Sequence[Outcome], b_correct: Sequence[Outcome]) -> Complementarity:
    """Error overlap of two policies scored on the same items, position by position."""
    pairs, unjudged = _judged_pairs(a_correct, b_correct)
    both = a_only = b_only = right = 0
    for a, b in pairs:
        if not a and not b:
            both += 1
        elif not a:
            a_only += 1
        elif not b:
            b_only += 1
        else:
            right += 1
    union = both + a_only + b_only
    return Complementarity(
        n=len(pairs),
        both_wrong=both,
        exactly_one_wrong=a_only + b_only,
        a_only_wrong=a_only,
        b_only_wrong=b_only,
        both_right=right,
        jaccard=both / union if union else None,
        unjudged=unjudged,
    )


def answer_key(answer: str | None) -> str | None:
    """An answer as compared for agreement: whitespace removed, lower-cased; None when absent or empty.

    A string comparison, deliberately cheap and task-agnostic: ``4.0`` and ``4`` differ."""
    key = None if answer is None else "".join(answer.split()).lower()
    return key or None


@dataclass(frozen=True)
class AnswerAgreement:
    """How often two policies' answers to the same items differ, position by position.

    Only pairs where both gave an answer are compared (a missing answer is a format failure,
    counted in ``missing``, not a different answer); ``rate`` is ``differ / both_answered``."""

    n: int
    both_answered: int
    differ: int
    missing: int

    @property
    def rate(self) -> float | None:
        return self.differ / self.both_answered if self.both_answered else None

    def to_dict(self) -> JSONRecord:
        return {**asdict(self), "rate": self.rate}


def answer_agreement(a_answers: Sequence[str | None], b_answers: Sequence[str | None]) -> AnswerAgreement:
    """Answers of two policies on the same items (same problem, same sample index), compared by
    :func:`answer_key`."""
    if len(a_answers) != len(b_answers):
        raise ValueError(f"paired answers differ in length: {len(a_answers)} vs {len(b_answers)}")
    keys = [(answer_key(a), answer_key(b)) for a, b in zip(a_answers, b_answers, strict=True)]
    both = [(a, b) for a, b in keys if a is not None and b is not None]
    return AnswerAgreement(
        n=len(keys),
        both_answered=len(both),
        differ=sum(a != b for a, b in both),
        missing=len(keys) - len(both),
    )


def conversion(
    first_correct: Sequence[Outcome], second_correct: Sequence[Outcome], confidence: float = 0.95
) -> Rate:
    """P(second right | first wrong): how often the reader fixes a wrong draft, with its interval.

    A draft not judged is not known wrong, and a judged-wrong draft's unjudged fix is not known
    fixed: both are left out and counted in ``unjudged`` (:func:`judged`)."""
    if len(first_correct) != len(second_correct):
        raise ValueError(f"paired outcomes differ in length: {len(first_correct)} vs {len(second_correct)}")
    fixed = [None if f is None else s for f, s in zip(first_correct, second_correct, strict=True) if not f]
    return rate(fixed, confidence)


BOOTSTRAP_REPS = 4000


def cluster_bootstrap(
    per_problem: Sequence[Sequence[Outcome]], confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile-bootstrap interval of pass@1 when each problem was sampled several times.

    Samples of one problem are not independent (the problem's difficulty is shared), so
    a Clopper–Pearson interval over all seeds' trials pooled is too narrow. Resampling
    whole problems (clusters) keeps that dependence. Seeded, so a report repeats. Unjudged
    samples are left out (:func:`judged`), a problem with none judged too.
    """
    import numpy as np

    kept = [judged(x)[0] for x in per_problem]
    means = np.array([np.mean(x) for x in kept if x], dtype=float)
    if means.size == 0:
        return (0.0, 1.0)
    rng = np.random.default_rng(0)
    draws = rng.integers(0, means.size, size=(BOOTSTRAP_REPS, means.size))
    boot = means[draws].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))


@dataclass(frozen=True)
class Difference:
    """A paired difference of means (x − y) with its interval, and how it was resampled."""

    mean: float
    low: float
    high: float
    seeds: int
    problems: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def paired_bootstrap(
    x: Sequence[Sequence[float | None]],
    y: Sequence[Sequence[float | None]],
    confidence: float = 0.95,
    reps: int = BOOTSTRAP_REPS,
) -> Difference:
    """Interval of mean(x) − mean(y) for outcomes paired by seed (row) and problem (column).

    ``x[s][p]`` and ``y[s][p]`` are two methods' outcomes on problem ``p`` in run ``s`` (for
    arms: training seed ``s`` of each, which share that seed's problem stream). Each
    replicate resamples rows and columns with replacement, *the same draw for both*, so
    problem difficulty and seed luck cancel in the difference; both sources of variation
    are in the interval. Percentile interval, seeded, so a report repeats.

    A ``None`` (unjudged, :func:`judged`) leaves its cell out of both sides: the means are over
    the cells both judged (a replicate that draws none of them is left out of the quantiles).
    """
    import numpy as np

    def grid(rows: Sequence[Sequence[float | None]]) -> np.ndarray:
        return np.asarray([[np.nan if v is None else v for v in row] for row in rows], dtype=float)

    a, b = grid(x), grid(y)
    if a.shape != b.shape or a.ndim != 2 or a.size == 0:
        raise ValueError(f"paired outcomes need equal non-empty seeds×problems tables: {a.shape}, {b.shape}")
    d = a - b
    if np.isnan(d).all():
        raise ValueError("paired outcomes with no cell judged on both sides have no difference")
    rng = np.random.default_rng(0)
    rows = rng.integers(0, d.shape[0], size=(reps, d.shape[0]))
    cols = rng.integers(0, d.shape[1], size=(reps, d.shape[1]))
    judged_cells = ~np.isnan(d)
    filled = np.where(judged_cells, d, 0.0)
    # mean over the judged cells of the resampled grid (the plain mean when every cell is judged)
    sums = np.array([filled[r][:, c].sum() for r, c in zip(rows, cols, strict=True)])
    counts = np.array([judged_cells[r][:, c].sum() for r, c in zip(rows, cols, strict=True)])
    boot = sums[counts > 0] / counts[counts > 0]
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    return Difference(float(np.nanmean(d)), float(lo), float(hi), int(d.shape[0]), int(d.shape[1]))


def verdict_of(low: float, high: float, above: str, below: str, same: bool = False) -> str:
    """A change's interval in words: ``above`` / ``below`` when it excludes 0, else within noise;
    "no change" when nothing changed: every value the same on both sides, which for values is a
    zero-width interval, and for a rate (``same``: 0/4 then 0/6) an interval as wide as few
    outcomes make it, though no outcome differs."""
    if same or low == high == 0:
        return "no change"
    if low > 0:
        return above
    return below if high < 0 else "within noise"


def welch_interval(
    x: Sequence[float], y: Sequence[float], confidence: float = 0.95
) -> tuple[float, float] | None:
    """Welch's interval of mean(x) − mean(y) for two independent samples (None if either has < 2)."""
    if len(x) < 2 or len(y) < 2:
        return None
    from scipy.stats import t

    mx, my = statistics.fmean(x), statistics.fmean(y)
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    se = math.sqrt(vx + vy)
    if se == 0:
        return (mx - my, mx - my)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    half = float(t.ppf(0.5 + confidence / 2, df)) * se
    return mx - my - half, mx - my + half


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a proportion (no continuity correction); [0, 1] without trials."""
    if trials <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes out of {trials} trials")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    centre = (successes + z * z / 2) / (trials + z * z)
    half = z / (trials + z * z) * math.sqrt(successes * (trials - successes) / trials + z * z / 4)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_interval(
    x1: int, n1: int, x2: int, n2: int, confidence: float = 0.95
) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval (1998, method 10) for ``x1/n1 − x2/n2``, two independent
    proportions: each side's Wilson interval sets how far the difference can move that way, so
    the interval stays inside [−1, 1] and is sound at 0 or n successes and on few trials, where
    the Wald and Welch intervals are not. ``None`` when either side has no trials."""
    if n1 <= 0 or n2 <= 0:
        return None
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson_interval(x1, n1, confidence)
    l2, u2 = wilson_interval(x2, n2, confidence)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def t_interval(
    values: Sequence[float], confidence: float = 0.95, bounds: tuple[float, float] | None = None
) -> tuple[float, float] | None:
    """Student-t interval of the mean of a few independent values (e.g. runs with different seeds),
    clipped into ``bounds`` (the metric's range: [0, 1] for a rate, [−1, 1] for a difference of
    two): with 2 values it rests on one degree of freedom (t₀.₉₇₅ = 12.71) and would otherwise
    reach far outside any rate."""
    vals = [float(v) for v in values if v is not None]
    if len(vals) < 2:
        return None
    from scipy.stats import t

    m, s = statistics.fmean(vals), statistics.stdev(vals)
    half = float(t.ppf(0.5 + confidence / 2, len(vals) - 1)) * s / math.sqrt(len(vals))
    if bounds is None:
        return m - half, m + half
    return max(bounds[0], m - half), min(bounds[1], m + half)


def least_discordant(confidence: float = 0.95) -> int:
    """The fewest discordant pairs (one arm right, the other wrong) with which an exact two-sided
    sign (McNemar) test at ``confidence`` can reject at all: all n pairs on one side has p = 2·0.5ⁿ,
    so n ≥ log₂(2 / α); 6 at 95 %, 8 at 99 %."""
    alpha = 1 - confidence
    return max(1, math.ceil(math.log2(2 / alpha) - 1e-12))


def detectable_difference(
    pairs: int, base_rate: float, confidence: float = 0.95, power: float = 0.8, correlation: float = 0.0
) -> float:
    """The smallest paired difference of two pass rates a two-sided test at ``confidence`` detects
    with ``power`` over ``pairs`` paired outcomes, both arms near ``base_rate``:
    (z₁₋α/₂ + z₁₋β) · √(2p(1 − p)(1 − r) / n) (Connor 1987; r = 0, the arms' outcomes on a problem
    uncorrelated, is the conservative choice). Clipped at 1: a rate cannot move further."""
    from scipy.stats import norm

    if pairs <= 0:
        return 1.0
    p = min(max(base_rate, 0.0), 1.0)
    discordant = 2 * p * (1 - p) * (1 - correlation)
    z = float(norm.ppf(0.5 + confidence / 2)) + float(norm.ppf(power))
    return min(1.0, z * math.sqrt(discordant / pairs))


def smoothed(values: Sequence[float | None], width: int) -> tuple[list[float], list[float], list[float]]:
    """Centred moving mean over ``width`` steps and its ±1.96·s/√k band (k = values present);
    a window with one value has no band (NaN, drawn as a gap), not a zero-width one.

    The window reaches ``width // 2`` steps each side, so an even ``width`` counts one more
    step; ``None`` values (a step that did not log the metric) are left out of their windows.
    """
    means, lows, highs = [], [], []
    half = width // 2
    for i in range(len(values)):
        win = [v for v in values[max(0, i - half) : i + half + 1] if v is not None]
        m = statistics.mean(win) if win else math.nan
        sd = (sum((v - m) ** 2 for v in win) / (len(win) - 1)) ** 0.5 if len(win) > 1 else math.nan
        band = 1.96 * sd / math.sqrt(len(win)) if win else math.nan
        means.append(m)
        lows.append(m - band)
        highs.append(m + band)
    return means, lows, highs


def fisher_greater(bad_after: int, n_after: int, bad_before: int, n_before: int) -> float:
    """One-sided Fisher exact p-value that the ``after`` share of ``bad`` is *greater* than the
    ``before`` one: the chance, with the 2×2 margins fixed, of ``bad_after`` or more of all the
    bad ones falling ``after``. Exact for small counts (a step's few dozen completions), where a
    normal approximation would call 5 of 8 against 0 of 8 certain."""
    for bad, n in ((bad_after, n_after), (bad_before, n_before)):
        if not 0 <= bad <= n:
            raise ValueError(f"need 0 <= bad <= n, got {bad} of {n}")
    total, bad = n_after + n_before, bad_after + bad_before
    if total == 0:
        return 1.0
    denom = math.comb(total, bad)
    top = min(bad, n_after)
    tail = sum(math.comb(n_after, k) * math.comb(n_before, bad - k) for k in range(bad_after, top + 1))
    return min(1.0, tail / denom)
