"""The power of the decision rule a study registers, by simulating that rule.

A closed formula (McNemar's, :func:`agon_env.stats.detectable_difference`) is the power of a test
on independent pairs. The registered rule is another test: a percentile bootstrap that resamples
seeds *and* problems (:func:`agon_env.stats.paired_bootstrap`), every seed's difference agreeing
in sign, and at least :func:`agon_env.stats.least_discordant` discordant pairs
(:func:`agon_env.study.analysis.verdict`). Resampling seeds widens the interval and the every-seed
clause can only remove detections, so its detectable difference is larger than the formula's; the
only honest figure is that rule's own, so this module draws studies and applies it.

The simulated study (:func:`draw`): each test problem has a pass rate drawn from a Beta with mean
``base_rate`` whose within-problem correlation across seeds and arms is :data:`ICC` (hard
problems stay hard); each unit (arm × seed) has its own training luck, a shift of its rate with
standard deviation :data:`SEED_LUCK`; the first arm is better by ``difference`` on average.
Outcomes are 0/1 draws from those rates. All randomness is drawn once per :class:`Noise`, so
power rises monotonically with the difference and a bisection on it is exact for the draws
(common random numbers); everything is seeded, so a registration repeats.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agon_env.json_value import JSONRecord
from agon_env.stats import BOOTSTRAP_REPS, least_discordant

ICC = 0.5
"""Correlation of one problem's outcomes across seeds and arms: some problems are hard for all."""
SEED_LUCK = 0.02
"""Standard deviation of one unit's (arm × seed's) pass rate around its arm's: training luck."""
DRAWS = 400
"""Simulated studies per difference tried: ±2 pp of standard error on a power near 80 %."""
POWER = 0.8
"""The power the detectable difference is stated at (the conventional 80 %)."""
RESOLUTION = 0.001
"""The bisection stops when the detectable difference is known to 0.1 pp."""
CHUNK = 2_000_000
"""Bootstrap cells (draws × seeds × replicates) computed at once: bounds memory at ~16 MB."""


@dataclass(frozen=True)
class Design:
    """What a registered comparison's power depends on: its size, base rate and decision rule."""

    seeds: int
    problems: int
    base_rate: float
    confidence: float = 0.95
    every_seed: bool = True


@dataclass(frozen=True)
class Noise:
    """The randomness of ``draws`` simulated studies, drawn once: problem rates ``(draws, N)``,
    unit luck ``(draws, 2, S)`` and the uniforms the 0/1 outcomes come from ``(draws, 2, S, N)``."""

    rates: np.ndarray
    luck: np.ndarray
    uniforms: np.ndarray


def noise(
    design: Design, draws: int = DRAWS, seed: int = 0, icc: float = ICC, luck: float = SEED_LUCK
) -> Noise:
    """The randomness of ``draws`` studies of ``design``; ``icc`` 0 gives every problem the base rate."""
    rng = np.random.default_rng(seed)
    p, n, s = design.base_rate, design.problems, design.seeds
    if icc > 0:
        # Beta(a, b) with mean p has intra-class correlation 1 / (a + b + 1)
        total = (1 - icc) / icc
        rates = rng.beta(p * total, (1 - p) * total, size=(draws, n))
    else:
        rates = np.full((draws, n), p)
    return Noise(rates, rng.normal(0.0, luck, size=(draws, 2, s)), rng.random((draws, 2, s, n)))


def shifted(rates: np.ndarray, shift: np.ndarray, base: float) -> np.ndarray:
    """Rates moved by ``shift`` on average over problems of mean ``base``, staying inside [0, 1]: a
    rise converts a share ``shift / (1 − base)`` of each problem's failures, a fall a share
    ``−shift / base`` of its successes (no clipping, so the mean moves by exactly ``shift``)."""
    shift = np.clip(shift, -base, 1 - base)
    up = rates + shift * (1 - rates) / (1 - base)
    down = rates + shift * rates / base
    return np.where(shift >= 0, up, down)


def draw(design: Design, difference: float, randomness: Noise) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes ``(draws, S, N)`` of the first arm (better by ``difference``) and the second."""
    p = design.base_rate
    rates = randomness.rates[:, None, :]
    first = shifted(rates, difference + randomness.luck[:, 0, :, None], p)
    second = shifted(rates, randomness.luck[:, 1, :, None], p)
    return (
        (randomness.uniforms[:, 0] < first).astype(np.int8),
        (randomness.uniforms[:, 1] < second).astype(np.int8),
    )


def counts(index: np.ndarray, size: int) -> np.ndarray:
    """How often each of ``size`` values appears in each row of ``index``: ``(rows, size)``."""
    rows = index.shape[0]
    flat = (index + size * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size).astype(float)


@functools.lru_cache(maxsize=8)
def resampled(seeds: int, problems: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`agon_env.stats.paired_bootstrap`'s draws as weights: how often each replicate drew
    each seed ``(reps, S)`` and each problem ``(reps, N)``; float32, which is exact here (every
    product and sum below is an integer far under 2**24). Cached: a bisection reuses them."""
    rng = np.random.default_rng(0)
    rows = counts(rng.integers(0, seeds, size=(reps, seeds)), seeds).astype(np.float32)
    cols = counts(rng.integers(0, problems, size=(reps, problems)), problems).astype(np.float32)
    return rows, cols


def bootstrap_bounds(
    d: np.ndarray, confidence: float, reps: int = BOOTSTRAP_REPS
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`agon_env.stats.paired_bootstrap`'s interval for each of many ``(S, N)`` difference
    tables ``d`` ``(draws, S, N)`` at once: the same seeded row and column draws, each replicate's
    mean written as weights (how often each seed and problem was drawn) so one matrix product
    serves every table."""
    k, s, n = d.shape
    rows, cols = resampled(s, n, reps)
    step = max(1, CHUNK // (s * reps))
    boot = np.empty((k, reps))
    for start in range(0, k, step):
        part = d[start : start + step].astype(np.float32)
        per_seed = (part.reshape(-1, n) @ cols.T).reshape(part.shape[0], s, reps)
        total = sum(per_seed[:, i, :] * rows[:, i] for i in range(s))
        boot[start : start + step] = np.asarray(total, dtype=float) / (s * n)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha], axis=1)
    return low, high


def registered_rule(
    first: np.ndarray, second: np.ndarray, confidence: float = 0.95, every_seed: bool = True
) -> np.ndarray:
    """The registered verdict of each simulated study ``(draws, S, N)``: +1 first better, −1 worse,
    0 none (:func:`agon_env.study.analysis.verdict`): enough discordant pairs, the bootstrap
    interval off 0 and, with ``every_seed``, every seed's mean difference of the same sign."""
    d = first.astype(np.int16) - second.astype(np.int16)
    enough = np.count_nonzero(d, axis=(1, 2)) >= least_discordant(confidence)
    low, high = bootstrap_bounds(d, confidence)
    per_seed = d.mean(axis=2)
    up = (low > 0) & (np.all(per_seed > 0, axis=1) if every_seed else True)
    down = (high < 0) & (np.all(per_seed < 0, axis=1) if every_seed else True)
    return np.where(enough & up, 1, np.where(enough & down, -1, 0))


Rule = Callable[[np.ndarray, np.ndarray, float, bool], np.ndarray]
"""A decision rule on simulated studies: (first, second, confidence, every_seed) -> verdicts."""


def rejections(
    design: Design, difference: float, randomness: Noise, rule: Rule = registered_rule
) -> np.ndarray:
    """``rule``'s verdicts (+1, −1, 0) on the studies ``randomness`` draws at ``difference``."""
    first, second = draw(design, difference, randomness)
    return rule(first, second, design.confidence, design.every_seed)


def detectable(
    design: Design,
    power: float = POWER,
    draws: int = DRAWS,
    seed: int = 0,
    rule: Rule = registered_rule,
    randomness: Noise | None = None,
) -> float:
    """The smallest difference ``rule`` (default: the registered one) calls "better" in ``power``
    of ``draws`` simulated studies of ``design`` (bisection to :data:`RESOLUTION`); 1.0 past the
    largest possible rise (``1 − base_rate``), which then means "none it can detect"."""
    randomness = noise(design, draws, seed) if randomness is None else randomness

    def enough(difference: float) -> bool:
        return float(np.mean(rejections(design, difference, randomness, rule) == 1)) >= power

    low, high = 0.0, 1.0 - design.base_rate
    if not enough(high):
        return 1.0
    while high - low > RESOLUTION:
        mid = (low + high) / 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def method(draws: int = DRAWS) -> str:
    """How :func:`detectable` got its figure, in words a registration states."""
    return (
        f"simulated: registered rule, {draws} draws, problem ICC {ICC:g}, "
        f"{100 * SEED_LUCK:g} pp luck per arm × seed"
    )


def statement(design: Design) -> JSONRecord:
    """The detectable difference of ``design``'s registered rule with its method, as registered."""
    return {"difference": detectable(design), "method": method(), "draws": DRAWS}
