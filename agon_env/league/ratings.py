"""The league's figures, as pure functions of its pairings' outcomes.

* :func:`pairing_figures` -- per pairing: cascade accuracy, the drafter's own accuracy,
  conversion (the challenger right where the draft was wrong), corruption (the challenger wrong
  where the draft was right), each with its exact interval, and the paired gain (cascade − draft,
  bootstrapped over problems). Unjudged outcomes are left out and counted, never wrong
  (:func:`agon_env.stats.judged`).
* :func:`seat_ratings` -- a Bradley–Terry rating per player in one seat, fitted by maximum
  likelihood, with a bootstrap interval over problems. What a *win* is differs by seat
  (:data:`WINS`): two challengers of the same draft on the same problem, one right and the other
  wrong; two drafters under the same challenger on the same problem, the cascade right under one
  and wrong under the other. Ties and unjudged answers are no game.
* :func:`transitivity` -- the share of cyclic triples of a seat's head-to-head matrix (triples no
  rating can order), beside the share that random outcomes with the same counts give.
* :func:`swapped_seats` -- each adapter's rating in the seat it did not train in, against the
  players that trained there.

Ratings are on the Elo scale: 400 points are 10:1 odds of a win. Each player also plays one win
and one loss against a fixed virtual player of rating 0 (a weak prior), so a player that won or
lost every game keeps a finite rating and a seat's scale is anchored.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from agon_env.league.games import Outcome, Pairing, Player
from agon_env.stats import Difference, Rate, conversion, paired_bootstrap, rate
from agon_env.vocabulary import CHALLENGER, DRAFTER, ROLES

if TYPE_CHECKING:
    import numpy as np

ELO = 400.0 / math.log(10.0)
"""Natural-log strength to Elo points: a difference of 400 is 10:1 odds."""
RATING_REPS = 1000
"""Bootstrap replicates of a seat's ratings (each refits every rating)."""
BASELINE_SIMS = 2000
"""Random tournaments simulated for the transitivity baseline."""
BOTH = "both"
"""A training seat: an adapter that alternated roles (agon's default) trained in both."""


@dataclass(frozen=True)
class PairingFigures:
    """One pairing's figures: the drafter's draft, the cascade, and what the challenger did to it."""

    drafter: str
    challenger: str
    draft_accuracy: Rate
    accuracy: Rate
    """The cascade's accuracy (the challenger's final answer)."""
    conversion: Rate
    """P(cascade right | draft wrong)."""
    corruption: Rate
    """P(cascade wrong | draft right)."""
    gain: Difference | None
    """Cascade − draft accuracy, paired by problem (None when no problem was judged on both)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "drafter": self.drafter,
            "challenger": self.challenger,
            "draft_accuracy": self.draft_accuracy.to_dict(),
            "accuracy": self.accuracy.to_dict(),
            "conversion": self.conversion.to_dict(),
            "corruption": self.corruption.to_dict(),
            "gain": None if self.gain is None else self.gain.to_dict(),
        }


def corruption(draft_correct: Sequence[Outcome], final_correct: Sequence[Outcome]) -> Rate:
    """P(final wrong | draft right): how often the reader spoils a right draft, with its interval.

    The mirror of :func:`agon_env.stats.conversion`: an unjudged draft is not known right, and a
    right draft's unjudged answer is not known spoiled; both are left out and counted."""
    if len(draft_correct) != len(final_correct):
        raise ValueError(f"paired outcomes differ in length: {len(draft_correct)} vs {len(final_correct)}")
    spoiled = [
        None if d is None or f is None else not f
        for d, f in zip(draft_correct, final_correct, strict=True)
        if d is not False
    ]
    return rate(spoiled)


def _as_float(outcomes: Sequence[Outcome]) -> list[float | None]:
    return [None if o is None else float(o) for o in outcomes]


def pairing_figures(p: Pairing) -> PairingFigures:
    pairs = zip(p.draft_correct, p.final_correct, strict=True)
    both_judged = any(d is not None and f is not None for d, f in pairs)
    gain = (
        paired_bootstrap([_as_float(p.final_correct)], [_as_float(p.draft_correct)]) if both_judged else None
    )
    return PairingFigures(
        drafter=p.drafter.id,
        challenger=p.challenger.id,
        draft_accuracy=rate(p.draft_correct),
        accuracy=rate(p.final_correct),
        conversion=conversion(p.draft_correct, p.final_correct),
        corruption=corruption(p.draft_correct, p.final_correct),
        gain=gain,
    )


def problems_of(pairings: Sequence[Pairing]) -> tuple[str, ...]:
    """The league's problems: every pairing must have played the same ones in the same order."""
    if not pairings:
        raise ValueError("a league of no pairings has no figures")
    first = pairings[0].problems
    for p in pairings:
        if p.problems != first:
            raise ValueError(f"{p.drafter.id} vs {p.challenger.id} played other problems than the rest")
    return first


def players_in(pairings: Sequence[Pairing], seat: str) -> list[Player]:
    """The players that sat in ``seat`` (sorted: run, adapter, step)."""
    return sorted({p.drafter if seat == DRAFTER else p.challenger for p in pairings})


WINS: Mapping[str, str] = {
    CHALLENGER: "two challengers of the same drafter's draft on the same problem: one right, the other wrong",
    DRAFTER: "two drafters under the same challenger on the same problem: the cascade right under one, wrong "
    "under the other",
}
"""What a win is, per seat (said in league.md beside the ratings)."""


def per_problem_wins(pairings: Sequence[Pairing], seat: str) -> tuple[list[Player], np.ndarray]:
    """The seat's players and ``W[i, j, q]``: wins of player ``i`` over player ``j`` on problem ``q``."""
    import numpy as np

    players = players_in(pairings, seat)
    index = {pl: i for i, pl in enumerate(players)}
    wins = np.zeros((len(players), len(players), len(problems_of(pairings))))
    # the players of one game share the other seat: challengers one drafter, drafters one challenger
    games: dict[Player, list[Pairing]] = {}
    for p in pairings:
        games.setdefault(p.drafter if seat == CHALLENGER else p.challenger, []).append(p)
    for group in games.values():
        rows = [index[p.challenger if seat == CHALLENGER else p.drafter] for p in group]
        right = np.array([[o is True for o in p.final_correct] for p in group])
        wrong = np.array([[o is False for o in p.final_correct] for p in group])
        # i beats j on q when i's cascade is right and j's wrong (never i over itself: not both)
        np.add.at(
            wins, (np.array(rows)[:, None], np.array(rows)[None, :]), right[:, None, :] & wrong[None, :, :]
        )
    return players, wins


def fit_bradley_terry(wins: np.ndarray, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
    """Maximum-likelihood Bradley–Terry log-strengths for a stack of win matrices ``[..., n, n]``.

    Each player also has one win and one loss against a virtual player of log-strength 0: the
    log-likelihood is then strictly concave, so its maximum is finite and unique, and Newton's
    method (steps capped at 1 so a far start cannot overshoot) reaches it in a few dozen steps."""
    import numpy as np

    w = np.asarray(wins, dtype=float)
    games = w + np.swapaxes(w, -1, -2)
    won = w.sum(axis=-1) + 1.0
    theta = np.zeros(w.shape[:-1])
    eye = np.eye(w.shape[-1])
    for _ in range(max_iter):
        s = 1.0 / (1.0 + np.exp(theta[..., None, :] - theta[..., :, None]))  # P(i beats j)
        s0 = 1.0 / (1.0 + np.exp(-theta))  # P(i beats the virtual player)
        grad = won - (games * s).sum(axis=-1) - 2.0 * s0
        curv = games * s * (1.0 - s)
        # minus the Hessian: a weighted graph Laplacian plus the virtual games' positive diagonal
        info = eye * (curv.sum(axis=-1) + 2.0 * s0 * (1.0 - s0))[..., None] - curv
        step = np.linalg.solve(info, grad[..., None])[..., 0]
        theta = theta + np.clip(step, -1.0, 1.0)
        if np.max(np.abs(step), initial=0.0) < tol:
            break
    return theta


@dataclass(frozen=True)
class Rating:
    """One player's rating in one seat (Elo points) with its bootstrap interval over problems."""

    player: str
    seat: str
    rating: float
    low: float
    high: float
    games: int
    """Decided games (wins plus losses) the player's rating rests on."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _bootstrap_weights(problems: int, reps: int, seed: int) -> np.ndarray:
    """``[reps, problems]``: how often each problem is drawn in each replicate (the same for every seat)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, problems, size=(reps, problems))
    return np.stack([np.bincount(row, minlength=problems) for row in draws]).astype(float)


@dataclass(frozen=True)
class SeatFit:
    """A seat's fit: its players, point ratings, bootstrap ratings ``[reps, players]`` and games."""

    seat: str
    players: tuple[Player, ...]
    point: np.ndarray
    boot: np.ndarray
    games: np.ndarray
    problems: int

    def ratings(self, confidence: float = 0.95) -> list[Rating]:
        """Each player's rating with its percentile interval over the replicates."""
        import numpy as np

        alpha = (1 - confidence) / 2
        low, high = np.quantile(self.boot, [alpha, 1 - alpha], axis=0)
        return [
            Rating(pl.id, self.seat, float(self.point[i]), float(low[i]), float(high[i]), int(self.games[i]))
            for i, pl in enumerate(self.players)
        ]


def fit_seat(pairings: Sequence[Pairing], seat: str, *, seed: int = 0, reps: int = RATING_REPS) -> SeatFit:
    """Bradley–Terry ratings in ``seat`` (:data:`WINS`), refitted on ``reps`` bootstrap replicates
    over problems (seeded: the same seed draws the same problems, so a file recomputes exactly)."""
    import numpy as np

    if seat not in ROLES:
        raise ValueError(f"seat must be one of {ROLES}, got {seat!r}")
    players, per_problem = per_problem_wins(pairings, seat)
    total = per_problem.sum(axis=-1)
    weights = _bootstrap_weights(per_problem.shape[-1], reps, seed)
    boot = fit_bradley_terry(np.einsum("ijq,rq->rij", per_problem, weights)) * ELO
    games = (total + total.T).sum(axis=-1)
    return SeatFit(seat, tuple(players), fit_bradley_terry(total) * ELO, boot, games, per_problem.shape[-1])


def seat_ratings(
    pairings: Sequence[Pairing],
    seat: str,
    *,
    seed: int = 0,
    reps: int = RATING_REPS,
    confidence: float = 0.95,
) -> list[Rating]:
    """Each player's rating in ``seat`` with its bootstrap interval (:func:`fit_seat`)."""
    return fit_seat(pairings, seat, seed=seed, reps=reps).ratings(confidence)


def head_to_head(pairings: Sequence[Pairing], seat: str) -> tuple[list[Player], np.ndarray]:
    """The seat's players and its head-to-head matrix ``W[i, j]``: wins of ``i`` over ``j``."""
    players, per_problem = per_problem_wins(pairings, seat)
    return players, per_problem.sum(axis=-1)


def cyclic_shares(wins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cyclic, decided)`` for a stack of head-to-head matrices ``[..., n, n]``: the triples whose
    three pairs each have a majority (``decided``), and of those the ones whose majorities run in a
    cycle (i beats j beats k beats i): triples no rating can order."""
    import numpy as np

    n = wins.shape[-1]
    triples = np.array(list(itertools.combinations(range(n), 3)), dtype=int).reshape(-1, 3)
    i, j, k = triples.T
    beats = wins > np.swapaxes(wins, -1, -2)
    split = wins != np.swapaxes(wins, -1, -2)
    decided = split[..., i, j] & split[..., j, k] & split[..., i, k]
    forward = beats[..., i, j] & beats[..., j, k] & beats[..., k, i]
    backward = beats[..., i, k] & beats[..., k, j] & beats[..., j, i]
    return (decided & (forward | backward)).sum(axis=-1), decided.sum(axis=-1)


@dataclass(frozen=True)
class Transitivity:
    """A seat's cyclic triples against random outcomes with the same number of games per pair."""

    seat: str
    cyclic: int
    decided: int
    share: float | None
    baseline: float | None
    """The mean share of cyclic triples when every decided game is a coin flip (simulated, seeded)."""
    verdict: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


VERDICTS: Sequence[tuple[Callable[[float, float], bool], str]] = (
    (lambda share, _base: share == 0, "transitive: no cyclic triple"),
    (lambda share, base: share < base, "nearly transitive: fewer cyclic triples than random outcomes give"),
    (lambda _share, _base: True, "non-transitive: as many cyclic triples as random outcomes give, or more"),
)
"""The transitivity line's words, first match wins."""


def transitivity(
    pairings: Sequence[Pairing], seat: str, *, seed: int = 0, sims: int = BASELINE_SIMS
) -> Transitivity:
    """The share of the seat's decided triples that are cyclic, beside the random baseline: the
    same games per pair, each won by either side with probability ½, ``sims`` times (seeded)."""
    import numpy as np

    _, wins = head_to_head(pairings, seat)
    cyclic, decided = (int(x) for x in cyclic_shares(wins))
    games = (wins + wins.T).astype(int)
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.binomial(np.broadcast_to(games, (sims, *games.shape)), 0.5), k=1)
    sim_cyclic, sim_decided = cyclic_shares(upper + np.swapaxes(np.triu(games - upper, k=1), -1, -2))
    some = sim_decided > 0
    share = cyclic / decided if decided else None
    baseline = float(np.mean(sim_cyclic[some] / sim_decided[some])) if some.any() else None
    if share is None:
        verdict = "untested: no triple of players with a decided head-to-head in every pair"
    else:
        verdict = next(words for test, words in VERDICTS if test(share, baseline or 0.0))
    return Transitivity(seat, cyclic, decided, share, baseline, verdict)


@dataclass(frozen=True)
class SwappedSeat:
    """One player of an adapter that trained in one seat, rated in both."""

    player: str
    trained: str
    other: str
    trained_rating: Rating | None
    other_rating: Rating | None
    gap: Difference | None
    """Its rating in the other seat minus the mean rating there of the players that trained there,
    with the bootstrap interval (None when it did not play there or nobody trained there)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "player": self.player,
            "trained": self.trained,
            "other": self.other,
            "trained_rating": None if self.trained_rating is None else self.trained_rating.to_dict(),
            "other_rating": None if self.other_rating is None else self.other_rating.to_dict(),
            "gap": None if self.gap is None else self.gap.to_dict(),
        }


def swapped_seats(
    fits: Mapping[str, SeatFit], training_seats: Mapping[tuple[str, str], str], confidence: float = 0.95
) -> list[SwappedSeat]:
    """For each player whose adapter trained in one seat (``training_seats[(run, adapter)]`` is
    ``drafter`` or ``challenger``; ``both`` and absent adapters are skipped): its rating in each
    seat (``fits`` per seat, :func:`fit_seat`), and the gap in the seat it did not train in to the
    mean of the players that trained there."""
    import numpy as np

    ratings = {seat: {r.player: r for r in fits[seat].ratings(confidence)} for seat in ROLES}
    everyone = sorted(set(fits[DRAFTER].players) | set(fits[CHALLENGER].players))
    alpha = (1 - confidence) / 2
    out = []
    for player in everyone:
        trained = training_seats.get((player.run, player.adapter))
        if trained not in ROLES:
            continue
        other = ROLES[1 - ROLES.index(trained)]
        fit = fits[other]
        natives = [i for i, p in enumerate(fit.players) if training_seats.get((p.run, p.adapter)) == other]
        gap = None
        if player in fit.players and natives:
            me = fit.players.index(player)
            diffs = fit.boot[:, me] - fit.boot[:, natives].mean(axis=1)
            lo, hi = np.quantile(diffs, [alpha, 1 - alpha])
            mean = float(fit.point[me] - fit.point[natives].mean())
            gap = Difference(mean, float(lo), float(hi), 1, fit.problems)
        out.append(
            SwappedSeat(
                player.id, trained, other, ratings[trained].get(player.id), ratings[other].get(player.id), gap
            )
        )
    return out


@dataclass(frozen=True)
class LeagueFigures:
    """Every figure of a league, derived from its pairings' outcomes alone (what verify recomputes)."""

    pairings: tuple[PairingFigures, ...]
    ratings: Mapping[str, tuple[Rating, ...]]
    """Per seat (``drafter``, ``challenger``)."""
    transitivity: Mapping[str, Transitivity]
    swapped_seats: tuple[SwappedSeat, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "pairings": [p.to_dict() for p in self.pairings],
            "ratings": {seat: [r.to_dict() for r in rs] for seat, rs in self.ratings.items()},
            "transitivity": {seat: t.to_dict() for seat, t in self.transitivity.items()},
            "swapped_seats": [s.to_dict() for s in self.swapped_seats],
        }


def league_figures(
    pairings: Sequence[Pairing],
    training_seats: Mapping[tuple[str, str], str],
    *,
    seed: int = 0,
    reps: int = RATING_REPS,
    sims: int = BASELINE_SIMS,
) -> LeagueFigures:
    """The league's figures: per pairing, per seat (ratings, transitivity), and the swapped seats."""
    problems_of(pairings)
    fits = {seat: fit_seat(pairings, seat, seed=seed, reps=reps) for seat in ROLES}
    return LeagueFigures(
        pairings=tuple(pairing_figures(p) for p in pairings),
        ratings={seat: tuple(fits[seat].ratings()) for seat in ROLES},
        transitivity={seat: transitivity(pairings, seat, seed=seed, sims=sims) for seat in ROLES},
        swapped_seats=tuple(swapped_seats(fits, training_seats)),
    )
