"""agon_env.study.power simulates the decision rule a study registers, and its stated detectable
difference is that rule's: detected in 80 % of independent simulated studies, never a formula's."""

from __future__ import annotations

import numpy as np
import pytest

from agon_env import stats
from agon_env.study import analysis, power
from agon_env.study.registration import describe

SMALL = power.Design(seeds=2, problems=16, base_rate=0.5)


def test_the_vectorised_bootstrap_is_paired_bootstrap() -> None:
    first, second = power.draw(SMALL, 0.2, power.noise(SMALL, draws=8, seed=3))
    low, high = power.bootstrap_bounds(first.astype(int) - second, 0.95)
    for k in range(8):
        ref = stats.paired_bootstrap(first[k], second[k])
        assert (low[k], high[k]) == pytest.approx((ref.low, ref.high), abs=1e-12)


@pytest.mark.parametrize("every_seed", [True, False])
def test_the_simulated_rule_gives_the_registered_verdicts(every_seed: bool) -> None:
    """Draw for draw, the vectorised rule says what analysis.verdict says on the same outcomes."""
    design = power.Design(seeds=3, problems=12, base_rate=0.4, every_seed=every_seed)
    first, second = power.draw(design, 0.15, power.noise(design, draws=60, seed=5))
    fast = power.registered_rule(first, second, 0.95, every_seed)
    words = {"A better": 1, "A worse": -1}
    for k in range(60):
        x, y = first[k].tolist(), second[k].tolist()
        diff = stats.paired_bootstrap(x, y).to_dict()
        diff["per_seed"] = {str(s): float(np.mean(first[k, s]) - np.mean(second[k, s])) for s in range(3)}
        diff.update(analysis.discordant(x, y))
        assert fast[k] == words.get(analysis.verdict(diff, "A", every_seed), 0), k
    assert {-1, 0, 1} >= set(fast.tolist()) and (fast == 1).any() and (fast == 0).any()


def test_the_stated_difference_is_detected_80_percent_of_the_time_and_type_i_stays_under_5() -> None:
    design = power.Design(seeds=3, problems=100, base_rate=0.3)
    stated = power.detectable(design)
    assert stated == power.detectable(design)  # seeded: a registration repeats
    fresh = power.noise(design, draws=800, seed=11)  # not the draws the bisection saw
    detected = np.mean(power.rejections(design, stated, fresh) == 1)
    assert 0.75 <= detected <= 0.85, (stated, detected)
    null = power.noise(design, draws=1000, seed=12)
    assert np.mean(power.rejections(design, 0.0, null) != 0) <= 0.05


def test_where_the_rules_coincide_the_simulation_is_mcnemars_formula() -> None:
    """One seed, independent problems, no luck: the bootstrap over problems is a test on
    independent pairs and the every-seed clause is the interval's own sign, so the simulated
    difference is Connor's formula's (9.1 pp at 400 pairs, base 30 %)."""
    design = power.Design(seeds=1, problems=400, base_rate=0.3)
    randomness = power.noise(design, draws=400, seed=0, icc=0.0, luck=0.0)
    simulated = power.detectable(design, randomness=randomness)
    assert simulated == pytest.approx(stats.detectable_difference(400, 0.3), abs=0.01)


def test_mcnemars_difference_is_detected_far_less_than_80_percent_by_the_registered_rule() -> None:
    """3 seeds × 300 problems: the formula register used to state (±6.6 pp at 50 %) is not the
    registered rule's; seeds repeat the problems and the bootstrap resamples seeds too."""
    design = power.Design(seeds=3, problems=300, base_rate=0.5)
    formula = stats.detectable_difference(900, 0.5)
    assert formula == pytest.approx(0.066, abs=1e-3)
    detected = np.mean(power.rejections(design, formula, power.noise(design, draws=400, seed=1)) == 1)
    assert detected < 0.65, detected


def test_a_rise_no_study_of_this_size_detects_is_said_as_such() -> None:
    design = power.Design(seeds=2, problems=6, base_rate=0.5)
    assert power.detectable(design) == 1.0
    said = describe(
        {
            **power.statement(design),
            "power": 0.8,
            "confidence": 0.95,
            "seeds": 2,
            "problems": 6,
            "base_rate": 0.5,
            "base_rate_source": "stated",
        }
    )
    assert said.startswith("no difference detectable (not even the largest possible rise) at 80 % power")


def test_a_registration_from_before_the_simulation_states_its_formula_as_it_did() -> None:
    old = {
        "difference": 0.572,
        "problems_only": 0.809,
        "power": 0.8,
        "confidence": 0.95,
        "pairs": 12,
        "base_rate": 0.5,
        "base_rate_source": "none stated: 50 %, the worst case",
    }
    assert describe(old) == (
        "detectable difference ±57.2 pp at 80 % power and 95 % confidence over 12 seed × problem pairs "
        "(±80.9 pp if seeds repeat each other), base rate 50 % (none stated: 50 %, the worst case)"
    )
