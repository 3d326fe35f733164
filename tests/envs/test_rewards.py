import pytest

from agon_env.envs.rewards import (
    Outcome,
    challenger_reward,
    drafter_reward,
    episode_rewards,
    length_tiebreak,
    register_scheme,
    scheme_names,
)


def o(c: int, f: int = 1, n: int = 10) -> Outcome:
    return Outcome(correct=bool(c), format_ok=bool(f), length=n)


# (c_a, c_b) -> challenger reward with φ(b)=1, λ=0.5, computed by hand from the paper's formulas.
TABLE = {
    "conversion": {(0, 0): 0.5, (0, 1): 3.5, (1, 0): 0.5, (1, 1): 2.5},  # 2c(b) + c(b)(1-c(a)) + λφ
    "coop": {(0, 0): 0.5, (0, 1): 2.5, (1, 0): 0.5, (1, 1): 2.5},  # 2c(b) + λφ
    "margin": {(0, 0): 0.5, (0, 1): 3.5, (1, 0): -0.5, (1, 1): 2.5},  # 3c(b) - c(a) + λφ
}


@pytest.mark.parametrize("scheme", sorted(TABLE))
@pytest.mark.parametrize("ca,cb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_challenger_table(scheme, ca, cb):
    assert challenger_reward(o(ca), o(cb), scheme) == TABLE[scheme][(ca, cb)]
    # Format off removes exactly λ.
    assert challenger_reward(o(ca), o(cb, f=0), scheme) == TABLE[scheme][(ca, cb)] - 0.5


@pytest.mark.parametrize("c,f,expected", [(0, 0, 0.0), (0, 1, 0.5), (1, 0, 2.0), (1, 1, 2.5)])
def test_drafter_reward(c, f, expected):
    assert drafter_reward(o(c, f)) == expected
    assert drafter_reward(o(c, f), lam=1.0) == 2 * c + f


def test_paper_examples():
    assert episode_rewards(o(0), o(1)) == (0.5, 3.5)
    assert episode_rewards(o(1), o(1)) == (2.5, 2.5)


def test_length_tiebreak():
    assert length_tiebreak(o(1, n=5), o(1, n=9), 0.5) == (0.5, 0.0)
    assert length_tiebreak(o(1, n=9), o(1, n=5), 0.5) == (0.0, 0.5)
    assert length_tiebreak(o(1, n=5), o(1, n=5), 0.5) == (0.0, 0.0)
    assert length_tiebreak(o(0, n=5), o(1, n=9), 0.5) == (0.0, 0.0)
    # The drafter is shorter: it earns γ only when the flag lets a rival term into its reward.
    assert episode_rewards(o(1, n=3), o(1, n=4), gamma=0.5) == (2.5, 2.5)
    assert episode_rewards(o(1, n=3), o(1, n=4), gamma=0.5, tiebreak_drafter=True) == (3.0, 2.5)
    assert episode_rewards(o(1, n=3), o(1, n=4), "margin", gamma=0.5, tiebreak_drafter=True) == (3.0, 2.5)
    assert episode_rewards(o(1, n=4), o(1, n=3), gamma=0.5) == (2.5, 3.0)  # the shorter challenger


def test_unknown_and_duplicate_schemes():
    with pytest.raises(ValueError, match="unknown reward_scheme"):
        challenger_reward(o(0), o(1), "nope")
    with pytest.raises(ValueError, match="already registered"):
        register_scheme("conversion", lambda a, b: 0)
    assert {"conversion", "coop", "margin"} <= set(scheme_names())
