"""benchmarks/rule_power.py: the standard alternatives to the registered rule decide as their
textbooks say, and ignoring seed clustering is what inflates their type I error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import rule_power  # a script beside the package, not in it

from agon_env.study import power


def _table(first: list[list[int]], second: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([first], dtype=np.int8), np.array([second], dtype=np.int8)


def test_mcnemar_needs_six_one_sided_pairs_and_ignores_concordant_ones() -> None:
    # 6 pairs all one way: p = 2 · 0.5⁶ = 0.031 < 0.05; 5 of them: p = 0.0625
    six = _table([[1] * 6 + [0] * 10], [[0] * 6 + [0] * 10])
    five = _table([[1] * 5 + [1] * 11], [[0] * 5 + [1] * 11])
    assert rule_power.mcnemar(*six, 0.95, True).tolist() == [1]
    assert rule_power.mcnemar(*five, 0.95, True).tolist() == [0]
    assert rule_power.mcnemar(six[1], six[0], 0.95, True).tolist() == [-1]


def test_the_t_rules_read_problems_or_seeds_as_their_observations() -> None:
    # seed 0 better on every problem, seed 1 worse on one: over seeds the mean is 0.375 with sd 0.88
    first, second = _table([[1, 1, 1, 1], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 1]])
    assert rule_power.seed_t(first, second, 0.95, True).tolist() == [0]
    assert rule_power.problem_t(first, second, 0.95, True).tolist() == [0]  # 0.5, 0.5, 0.5, 0
    many = _table([[1] * 40, [1] * 40], [[0] * 40, [0] * 38 + [1, 1]])
    assert rule_power.problem_t(*many, 0.95, True).tolist() == [1]
    assert rule_power.problem_bootstrap(*many, 0.95, True).tolist() == [1]


def test_pooling_seeds_as_independent_pairs_inflates_type_i_where_the_registered_rule_does_not() -> None:
    """3 seeds × 300 problems at zero difference, 2 pp of luck per trained unit."""
    design = power.Design(seeds=3, problems=300, base_rate=0.3)
    null = power.noise(design, draws=400, seed=2)
    false = {n: np.mean(power.rejections(design, 0.0, null, r) != 0) for n, r in rule_power.RULES.items()}
    assert false["registered"] <= 0.05 and false["seed-t"] <= 0.08
    assert min(false["mcnemar"], false["problem-t"], false["problem-bootstrap"]) >= 0.10, false
    without_luck = power.noise(design, draws=400, seed=2, luck=0.0)
    assert np.mean(power.rejections(design, 0.0, without_luck, rule_power.mcnemar) != 0) <= 0.08
