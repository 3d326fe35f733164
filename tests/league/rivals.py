"""Scripted rivals for the league's tests: pairings whose outcomes are drawn, not played."""

from __future__ import annotations

import random
from collections.abc import Sequence

from agon_env.league.games import Pairing, Player


def problems(n: int) -> tuple[str, ...]:
    return tuple(f"q{i}" for i in range(n))


def ordered_league(
    drafts: Sequence[float], reads: Sequence[float], n: int = 60, seed: int = 0, run: str = "run"
) -> tuple[list[Player], list[Pairing]]:
    """Players ``agent@k`` (k = 0, 1, ...) of known strength: player k's draft is right with
    probability ``drafts[k]``; as challenger it fixes a wrong draft with probability ``reads[k]``
    and keeps a right one with probability ``0.9 + 0.1 * reads[k]``, so a better draft and a better
    reader both raise the cascade. Every player plays every other in both seats (not itself)."""
    rng = random.Random(seed)
    qs = problems(n)
    players = [Player(run, "agent", k) for k in range(len(drafts))]
    drafted = {pl: tuple(rng.random() < drafts[pl.step] for _ in qs) for pl in players}
    pairings = []
    for d in players:
        for c in players:
            if d == c:
                continue
            final = tuple(
                rng.random() < (0.9 + 0.1 * reads[c.step] if right else reads[c.step]) for right in drafted[d]
            )
            pairings.append(Pairing(d, c, qs, drafted[d], final))
    return players, pairings


def rock_paper_scissors(n: int = 40) -> tuple[list[Player], list[Pairing]]:
    """Three rivals, each converting the next one's drafts and corrupting the other's: rock fixes
    every wrong draft of paper and spoils every right draft of scissors, and so on round the circle.
    Each drafts half of the problems right."""
    qs = problems(n)
    players = [Player("rps", name, 0) for name in ("rock", "paper", "scissors")]
    draft = tuple(i % 2 == 0 for i in range(n))
    pairings = []
    for k, c in enumerate(players):
        converts, corrupts = players[(k + 1) % 3], players[(k + 2) % 3]
        pairings.append(Pairing(converts, c, qs, draft, tuple(True for _ in draft)))
        pairings.append(Pairing(corrupts, c, qs, draft, tuple(False for _ in draft)))
    return players, pairings
