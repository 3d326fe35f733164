"""The league's figures: hand-computed values, scripted rivals of known strength, a built-in cycle,
and the laws a rating must obey (relabelling players permutes ratings; swapping two players'
outcomes swaps their ratings)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rivals import ordered_league, problems, rock_paper_scissors

from agon_env.league.games import Pairing, Player
from agon_env.league.ratings import (
    ELO,
    corruption,
    cyclic_shares,
    fit_bradley_terry,
    fit_seat,
    league_figures,
    pairing_figures,
    per_problem_wins,
    seat_ratings,
    swapped_seats,
    transitivity,
)
from agon_env.vocabulary import CHALLENGER, DRAFTER, ROLES

D, X, Y = (Player("r", name, 0) for name in ("d", "x", "y"))
QS = problems(3)


def test_pairing_figures_by_hand_on_three_problems():
    # draft: right, wrong, unjudged; cascade: wrong, right, right
    f = pairing_figures(Pairing(D, X, QS, (True, False, None), (False, True, True)))
    assert (f.draft_accuracy.successes, f.draft_accuracy.trials, f.draft_accuracy.unjudged) == (1, 2, 1)
    assert (f.accuracy.successes, f.accuracy.trials, f.accuracy.unjudged) == (2, 3, 0)
    # conversion: of the one wrong draft, fixed; the unjudged draft is counted, not wrong
    assert (f.conversion.successes, f.conversion.trials, f.conversion.unjudged) == (1, 1, 1)
    # corruption: of the one right draft, spoiled
    assert (f.corruption.successes, f.corruption.trials, f.corruption.unjudged) == (1, 1, 1)
    # gain over the two problems judged on both sides: (0 - 1 + 1 - 0) / 2
    assert f.gain is not None and f.gain.mean == 0.0 and f.gain.problems == 3


def test_corruption_leaves_an_unjudged_answer_out_of_a_right_draft():
    r = corruption((True, True, False), (None, False, True))
    assert (r.successes, r.trials, r.unjudged) == (1, 1, 1)
    with pytest.raises(ValueError, match="differ in length"):
        corruption((True,), (True, False))


def test_a_game_is_one_right_and_the_other_wrong_and_unjudged_is_no_game():
    pairings = [
        Pairing(D, X, QS, (False, False, False), (True, False, True)),
        Pairing(D, Y, QS, (False, False, False), (False, False, None)),
    ]
    players, wins = per_problem_wins(pairings, CHALLENGER)
    assert players == [X, Y]
    # problem 0: x right, y wrong; problem 1: both wrong (a tie); problem 2: y unjudged
    assert wins[0, 1].tolist() == [1.0, 0.0, 0.0]
    assert wins[1, 0].tolist() == [0.0, 0.0, 0.0]
    # drafters are compared under one challenger: here each challenger had one drafter, no game
    _, drafter_wins = per_problem_wins(pairings, DRAFTER)
    assert drafter_wins.sum() == 0


def test_bradley_terry_by_hand_for_two_players():
    # a beats b 3 times, b beats a once, each also 1-1 against the virtual player (strength 0):
    # by symmetry theta_b = -theta_a = -t, and the likelihood's stationary point for a is
    # 4 = 4 * sigmoid(2t) + 2 * sigmoid(t); solved here by bisection, apart from the fit.
    def excess(t: float) -> float:
        return 4 - 4 / (1 + math.exp(-2 * t)) - 2 / (1 + math.exp(-t))

    lo, hi = 0.0, 5.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    theta = fit_bradley_terry(np.array([[0.0, 3.0], [1.0, 0.0]]))
    assert theta[0] == pytest.approx(lo, abs=1e-8) and theta[1] == pytest.approx(-lo, abs=1e-8)
    # a player with no games sits on the virtual player: rating 0
    assert fit_bradley_terry(np.zeros((2, 2))).tolist() == [0.0, 0.0]
    # one who won every game keeps a finite rating
    assert np.isfinite(fit_bradley_terry(np.array([[0.0, 50.0], [0.0, 0.0]]))).all()


def test_cyclic_triples_by_hand():
    cycle = np.array([[0, 2, 0], [0, 0, 2], [2, 0, 0]])
    order = np.array([[0, 2, 2], [0, 0, 2], [0, 0, 0]])
    tie = np.array([[0, 1, 0], [1, 0, 2], [2, 0, 0]])
    assert [tuple(int(v) for v in cyclic_shares(m)) for m in (cycle, order, tie)] == [(1, 1), (0, 1), (0, 0)]
    assert [int(v) for v in cyclic_shares(np.stack([cycle, order]))[0]] == [1, 0]


def test_scripted_rivals_of_known_strength_are_recovered_in_order():
    players, pairings = ordered_league(
        drafts=[0.05, 0.3, 0.55, 0.8, 0.95], reads=[0.1, 0.3, 0.5, 0.7, 0.9], n=150
    )
    for seat in ROLES:
        ratings = seat_ratings(pairings, seat, reps=200)
        assert [r.player for r in ratings] == [p.id for p in players]
        points = [r.rating for r in ratings]
        assert points == sorted(points), (seat, points)
        assert all(r.low <= r.rating <= r.high for r in ratings)
        # the strongest's interval lies above the weakest's
        assert ratings[-1].low > ratings[0].high


def test_a_rock_paper_scissors_cycle_is_non_transitive_and_ordered_rivals_are_transitive():
    _, cycle = rock_paper_scissors()
    _, ordered = ordered_league(drafts=[0.05, 0.3, 0.55, 0.8, 0.95], reads=[0.1, 0.3, 0.5, 0.7, 0.9], n=150)
    for seat in ROLES:
        rps = transitivity(cycle, seat, sims=400)
        assert (rps.cyclic, rps.decided) == (1, 1), seat
        assert rps.verdict.startswith("non-transitive")
        # three pairs of coin flips run in a circle 2 times in 8
        assert rps.baseline == pytest.approx(0.25, abs=0.06)
        fine = transitivity(ordered, seat, sims=400)
        assert fine.decided == 10 and fine.cyclic == 0 and fine.verdict.startswith("transitive")
        assert fine.baseline == pytest.approx(0.25, abs=0.06)


def _two_adapters(pairings: list[Pairing]) -> list[Pairing]:
    """Steps 0-1 become adapter ``a``, the rest adapter ``b`` (the same outcomes)."""

    def rename(p: Player) -> Player:
        return dataclasses.replace(p, adapter="a" if p.step < 2 else "b")

    return [
        dataclasses.replace(p, drafter=rename(p.drafter), challenger=rename(p.challenger)) for p in pairings
    ]


def test_the_swapped_seat_gap_is_the_rating_minus_the_mean_of_those_trained_there():
    _, pairings = ordered_league(drafts=[0.2, 0.4, 0.6, 0.8], reads=[0.2, 0.4, 0.6, 0.8], n=40)
    pairings = _two_adapters(pairings)
    fits = {seat: fit_seat(pairings, seat, reps=100) for seat in ROLES}
    checked = swapped_seats(fits, {("run", "a"): DRAFTER, ("run", "b"): BOTH_SEATS})
    assert [s.player for s in checked] == ["run:a@0", "run:a@1"]  # b trained in both: not checked
    challenger = {r.player: r.rating for r in fits[CHALLENGER].ratings()}
    # nobody trained as challenger: no one to compare with
    assert all(s.gap is None and s.other_rating is not None for s in checked)
    checked = swapped_seats(fits, {("run", "a"): DRAFTER, ("run", "b"): CHALLENGER})
    a0 = checked[0]
    assert (a0.player, a0.trained, a0.other) == ("run:a@0", DRAFTER, CHALLENGER)
    natives = (challenger["run:b@2"] + challenger["run:b@3"]) / 2
    assert a0.gap is not None and a0.gap.mean == pytest.approx(challenger["run:a@0"] - natives)
    assert a0.gap.low <= a0.gap.mean <= a0.gap.high
    b2 = next(s for s in checked if s.player == "run:b@2")
    assert b2.trained == CHALLENGER and b2.trained_rating is not None and b2.trained_rating.seat == CHALLENGER


BOTH_SEATS = "both"


outcome = st.sampled_from([True, False, None])


@settings(max_examples=25, deadline=None)
@given(
    finals=st.lists(st.lists(outcome, min_size=6, max_size=6), min_size=4, max_size=4),
    order=st.permutations(range(4)),
)
def test_relabelling_players_permutes_their_ratings(finals, order):
    """Four challengers of one draft: renaming them (a permutation of their steps) carries each
    rating with its outcomes, bootstrap interval included."""
    drafter = Player("r", "d", 99)
    draft = (False, True) * 3

    def league(steps: list[int]) -> list[Pairing]:
        return [
            Pairing(drafter, Player("r", "c", s), problems(6), draft, tuple(f))
            for s, f in zip(steps, finals, strict=True)
        ]

    before = {r.player: r for r in seat_ratings(league([0, 1, 2, 3]), CHALLENGER, reps=30)}
    after = {r.player: r for r in seat_ratings(league(list(order)), CHALLENGER, reps=30)}
    for k in range(4):
        was, now = before[f"r:c@{k}"], after[f"r:c@{order[k]}"]
        assert now.rating == pytest.approx(was.rating, abs=1e-6)
        assert (now.low, now.high, now.games) == pytest.approx((was.low, was.high, was.games), abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(finals=st.lists(st.lists(outcome, min_size=5, max_size=5), min_size=3, max_size=3))
def test_swapping_two_players_outcomes_swaps_their_ratings(finals):
    drafters = [Player("r", "d", k) for k in range(2)]
    challengers = [Player("r", "c", k) for k in range(3)]
    draft = (True, False, True, False, False)

    def league(rows: list[list[bool | None]]) -> list[Pairing]:
        return [
            Pairing(d, c, problems(5), draft, tuple(f))
            for d in drafters
            for c, f in zip(challengers, rows, strict=True)
        ]

    swapped = [finals[1], finals[0], finals[2]]
    before = [r.rating for r in seat_ratings(league(finals), CHALLENGER, reps=10)]
    after = [r.rating for r in seat_ratings(league(swapped), CHALLENGER, reps=10)]
    assert after == pytest.approx([before[1], before[0], before[2]], abs=1e-6)


def test_the_figures_repeat_under_a_seed_and_move_with_it():
    _, pairings = ordered_league(drafts=[0.3, 0.6, 0.8], reads=[0.3, 0.6, 0.8], n=20)
    one = league_figures(pairings, {}, seed=1, reps=50, sims=50).to_dict()
    assert one == league_figures(pairings, {}, seed=1, reps=50, sims=50).to_dict()
    other = league_figures(pairings, {}, seed=2, reps=50, sims=50).to_dict()
    assert one["ratings"] != other["ratings"]  # the intervals come from the seeded bootstrap
    assert [r["rating"] for r in one["ratings"][CHALLENGER]] == [
        r["rating"] for r in other["ratings"][CHALLENGER]
    ]
    assert pytest.approx(400 / math.log(10)) == ELO
