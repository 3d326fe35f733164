"""Playing a league: every player drafts for every other, on the same held-out problems.

The schedule (:func:`schedule`) holds every ordered pair of distinct players, each pair next to
its swap (so a league cut short by ``--pairs`` still has both seats of the pairs it kept), in an
order drawn from the league's seed. Each finished pairing is one line of ``pairings.jsonl`` in the
league folder (:func:`play_league`), written whole or not at all: a killed league, run again,
plays only the pairings it lacks, and the league it then writes is the one an uninterrupted run
writes (sampling seeds depend on the player and the problem, never on the order of play).

:class:`Arena` plays one pairing with real adapters on one shared base: the drafter's drafts of
each problem come from a sample cache keyed by the drafter, the problem and its seed, so each
drafter drafts each problem once whoever challenges it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agon_env.episodes import Start, play_episodes
from agon_env.evaluation.cache import CachedAgent, SampleCache
from agon_env.evaluation.splits import EvalData
from agon_env.json_value import JSONRecord
from agon_env.league.games import Pairing, Player
from agon_env.league.players import Contender, LeagueError
from agon_env.run_folder import append_lines, read_records
from agon_env.seeding import derive_seed
from agon_env.vocabulary import AGENT_A, AGENT_B

PAIRINGS = "pairings.jsonl"
"""The league folder's record of finished pairings: a header line (the league's players, problems
and seed), then one line per pairing."""

Play = Callable[[Player, Player], Pairing]
"""Plays one pairing: (drafter, challenger) -> what they played."""


def schedule(players: Sequence[Player], seed: int, pairs: int = 0) -> list[tuple[Player, Player]]:
    """Every (drafter, challenger) of distinct players, each pair followed by its swap, the pairs
    in an order drawn from ``seed``; ``pairs`` > 0 keeps the first that many."""
    unordered = [(a, b) for i, a in enumerate(players) for b in players[i + 1 :]]
    random.Random(derive_seed(seed, "league-schedule")).shuffle(unordered)
    ordered = [seating for a, b in unordered for seating in ((a, b), (b, a))]
    return ordered[:pairs] if pairs > 0 else ordered


def _header(players: Sequence[Player], problems: Sequence[str], seed: int) -> JSONRecord:
    return {"league": {"players": [p.id for p in players], "problems": list(problems), "seed": seed}}


@dataclass
class LeagueProgress:
    """What :func:`play_league` left: the pairings finished (the schedule's order), and how many of
    the scheduled ones it did not reach (0: the league is complete)."""

    pairings: list[Pairing]
    left: int
    played_now: int = 0
    seconds: list[float] = field(default_factory=list)
    """Each pairing played in this invocation, in seconds."""


def finished_pairings(record: Path, header: JSONRecord) -> dict[tuple[str, str], Pairing]:
    """The pairings ``record`` holds, by (drafter id, challenger id); refuses another league's file."""
    lines = read_records(record)
    if not lines:
        return {}
    if lines[0] != header:
        raise LeagueError(
            f"{record} holds another league (other players, problems or seed): give this league "
            "another --out, or remove that folder to play it again"
        )
    done = (Pairing.from_record(r) for r in lines[1:])
    return {(p.drafter.id, p.challenger.id): p for p in done}


def play_league(
    players: Sequence[Player],
    problems: Sequence[str],
    play: Play,
    folder: Path,
    *,
    seed: int = 0,
    pairs: int = 0,
    minutes: float = 0.0,
    log: Callable[[str], None] = lambda _msg: None,
) -> LeagueProgress:
    """Play the league's scheduled pairings that ``folder``'s record lacks, appending each as it
    ends; with ``minutes`` > 0 no pairing starts that would likely end past that budget (the
    slowest pairing so far is the estimate). A killed league continues where it stopped."""
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / PAIRINGS
    header = _header(players, problems, seed)
    done = finished_pairings(record, header)
    if not record.is_file() or not read_records(record):
        append_lines(record, [_json(header)])
    started, seconds = time.perf_counter(), []
    plan = schedule(players, seed, pairs)
    for drafter, challenger in plan:
        if (drafter.id, challenger.id) in done:
            continue
        if minutes > 0 and seconds and time.perf_counter() - started + max(seconds) > minutes * 60:
            log(f"budget of {minutes:g} min reached: the same command continues the league")
            break
        t0 = time.perf_counter()
        pairing = play(drafter, challenger)
        if pairing.problems != tuple(problems):
            raise ValueError(f"{drafter.id} -> {challenger.id} played other problems than the league's")
        append_lines(record, [_json(pairing.to_record())])
        done[drafter.id, challenger.id] = pairing
        seconds.append(time.perf_counter() - t0)
        log(f"{len(done)}/{len(plan)} {drafter.id} drafts, {challenger.id} challenges ({seconds[-1]:.1f} s)")
    kept = [done[d.id, c.id] for d, c in plan if (d.id, c.id) in done]
    return LeagueProgress(kept, len(plan) - len(kept), len(seconds), seconds)


def _json(record: JSONRecord) -> str:
    import json

    return json.dumps(record, separators=(",", ":"))


class Arena:
    """Plays pairings of real adapters on the held-out problems of ``data`` (its test part)."""

    def __init__(
        self,
        contenders: Sequence[Contender],
        data: EvalData,
        agent: Callable[[Contender], Any],
        identity: Callable[[Contender], str],
        seed: int = 0,
    ) -> None:
        self.by_id = {c.player.id: c for c in contenders}
        self.data, self.seed = data, seed
        self.cache = SampleCache()
        first = contenders[0].run
        self.env = data.env("challenge", data.test, first.exchange, first.reader_options())
        self._agent, self._identity = agent, identity
        self._agents: dict[str, CachedAgent] = {}

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(self.data.test.ids())

    def _cached(self, player: Player) -> CachedAgent:
        if player.id not in self._agents:
            c = self.by_id[player.id]
            self._agents[player.id] = CachedAgent(self._agent(c), self._identity(c), self.cache)
        return self._agents[player.id]

    def play(self, drafter: Player, challenger: Player) -> Pairing:
        seats = {AGENT_A: self._cached(drafter), AGENT_B: self._cached(challenger)}
        ids = self.problems
        indices = self.data.test.indices

        def seed_of(i: int, seat: str, turn: int) -> int:
            # The player and the problem, never the rival: a drafter's draft is the same sample in
            # every pairing (the cache serves it), a challenger samples the same seed everywhere.
            return derive_seed(self.seed, "league", seats[seat].identity, ids[i], turn)

        starts = [Start(i, AGENT_A, derive_seed(self.seed, "league-episode", i)) for i in indices]
        episodes = play_episodes(self.env, seats, starts, seed_of).episodes
        return Pairing(
            drafter,
            challenger,
            ids,
            tuple(e.first_correct for e in episodes),
            tuple(e.correct for e in episodes),
        )
