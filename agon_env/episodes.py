"""Playing episodes: env copies in lockstep, one batched agent call per seat per stage.

Training rollouts (:mod:`agon_env.algorithms.rollout`), evaluation
(:mod:`agon_env.evaluation.evaluate`) and the metrics of both read episodes from here
and only from here. :func:`play_episodes` resets one copy of the env per
:class:`Start`, and while any copy is unfinished asks each waiting seat's agent *once*
for all the observations waiting on it, so an LLM agent samples a whole stage as one
batch. Each turn's sampling seed comes from the caller's ``seed_of(episode, seat,
turn)``, so the samples do not depend on how the episodes are batched or sharded.

What comes back is typed: an :class:`Episode` per start, holding a :class:`Turn` per
completion with the env's own verdict (:class:`~agon_env.envs.turns.TurnResult`:
seat, role, reward, correctness, format, length, what draft it read) next to the
observation and the completion the agent returned. Nothing is re-parsed or re-judged
after the env has scored it.

The env is driven only through the PettingZoo AEC API (``reset`` / ``agent_selection``
/ ``observe`` / ``step`` / ``terminations`` / ``truncations``) plus the ``results`` it
publishes at the end of an episode; agents only through
:class:`~agon_env.agents.protocol.Agent`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol

from agon_env.agents.protocol import Agent, Completion
from agon_env.envs import scoring
from agon_env.envs.tasks.base import Task
from agon_env.envs.turns import TurnResult
from agon_env.json_value import JSONRecord
from agon_env.vocabulary import CHALLENGER, LATENT_TOKENS, is_handle

if TYPE_CHECKING:
    from pettingzoo import AECEnv

SeedFn = Callable[[int, str, int], int]
"""``(episode index, seat, turn number within the episode) -> sampling seed``."""


class TaskEnv(Protocol):
    """What playing episodes needs of an env: a PettingZoo AEC env over a task (``agon_env.make``'s
    wrapped draft-and-challenge env, or any subclass) that makes fresh copies of itself."""

    task: Task

    def spawn(self) -> AECEnv:
        """A fresh env sharing this one's task."""
        ...


@dataclass(frozen=True)
class Start:
    """How one episode begins: which problem, who drafts, and the env's reset seed."""

    problem_index: int
    drafter: str
    seed: int


@dataclass(frozen=True)
class Turn(TurnResult):
    """One completion in one episode: the env's verdict on it, plus what went in and out."""

    episode: int
    """Index of the episode in the list given to :func:`play_episodes`."""
    observation: Mapping[str, object]
    completion: Completion
    """What the agent returned (a :class:`~agon_env.agents.protocol.Completion` for LLM agents)."""

    @classmethod
    def of(
        cls, result: TurnResult, episode: int, observation: Mapping[str, object], completion: Completion
    ) -> Turn:
        own = {f.name: getattr(result, f.name) for f in fields(TurnResult)}
        return cls(**own, episode=episode, observation=observation, completion=completion)

    @property
    def draft_unusable(self) -> bool:
        """The env's verdict (shown :data:`~agon_env.envs.exchange.NO_SUMMARY`), or a latent
        challenge whose draft had no span: the env shows a handle either way, and only the
        completion knows that the cache it named was empty, so the challenger read nothing."""
        meta = getattr(self.completion, "meta", None) or {}
        return super().draft_unusable or (is_handle(self.draft) and meta.get(LATENT_TOKENS) == 0)


@dataclass(frozen=True)
class Episode:
    """One finished episode: its start and its turns in play order (draft first)."""

    index: int
    problem_id: str
    start: Start
    turns: tuple[Turn, ...]

    @property
    def problem_index(self) -> int:
        return self.start.problem_index

    def turn(self, role: str) -> Turn | None:
        """The turn played in ``role`` (``None`` when the mode has no such turn)."""
        return next((t for t in self.turns if t.role == role), None)

    @property
    def draft(self) -> Turn:
        return self.turns[0]

    @property
    def challenge(self) -> Turn | None:
        return self.turn(CHALLENGER)

    @property
    def correct(self) -> bool | None:
        """Whether the episode's reported answer (its last turn's) is right; ``None`` when the task
        gave it no verdict (:attr:`TurnResult.verdict`): unjudged, not wrong."""
        return self.turns[-1].verdict

    @property
    def first_correct(self) -> bool | None:
        """The draft's verdict (``None``: unjudged)."""
        return self.turns[0].verdict

    @property
    def format_ok(self) -> bool:
        return self.turns[-1].format_ok

    @property
    def tokens(self) -> int | None:
        """Tokens generated over all turns: a cascade's cost includes its draft."""
        counts = [t.tokens for t in self.turns]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    @property
    def chars(self) -> int:
        return sum(t.chars for t in self.turns)

    def to_dict(self) -> JSONRecord:
        """JSON-ready outcome (no completion text): what ``eval.json`` stores per episode."""
        return {
            "problem_index": self.problem_index,
            "problem_id": self.problem_id,
            "seed": self.start.seed,
            "correct": self.correct,
            "first_correct": self.first_correct,
            "format_ok": self.format_ok,
            "tokens": self.tokens,
            "chars": self.chars,
            "turns": [t.outcome() for t in self.turns],
        }


@dataclass
class Played:
    """The episodes of one :func:`play_episodes` call and where its time went."""

    episodes: list[Episode]
    acting_s: float = 0.0
    """Seconds inside ``agent.act`` (generation)."""
    stepping_s: float = 0.0
    """Seconds inside ``env.step`` (parsing, verification, rewards)."""


def spawn(env: AECEnv) -> AECEnv:
    """A fresh copy of ``env`` to play one episode in (the template is never stepped)."""
    # DraftChallengeEnv.spawn shares the (possibly large) task; other AEC envs get a copy.
    return env.spawn() if hasattr(env, "spawn") else copy.deepcopy(env)


def _done(env: AECEnv) -> bool:
    return all(env.terminations.get(a, False) or env.truncations.get(a, False) for a in env.agents)


def play_episodes(
    env: TaskEnv,
    agents: Mapping[str, Agent],
    starts: Sequence[Start],
    seed_of: SeedFn | None = None,
) -> Played:
    """Play one episode per start in lockstep; episodes come back in the order of ``starts``.

    ``agents`` maps env seats to agents (one-seat modes need only the drafter's).
    ``seed_of`` gives each turn its sampling seed; without it agents sample unseeded.
    The envs of a stage are stepped concurrently, so their answers are scored at once, and the
    call is one scoring batch (:mod:`agon_env.envs.scoring`): a scorer that hangs costs about
    one limit, not one per answer.
    """
    with scoring.batch():
        return _play(env, agents, starts, seed_of)


def _play(
    env: TaskEnv, agents: Mapping[str, Agent], starts: Sequence[Start], seed_of: SeedFn | None
) -> Played:
    task = getattr(env, "task", None)
    envs = [spawn(env) for _ in starts]
    for e, s in zip(envs, starts, strict=True):
        e.reset(seed=s.seed, options={"drafter": s.drafter, "problem_index": int(s.problem_index)})
    seen: list[list[tuple[Mapping[str, object], Completion]]] = [[] for _ in envs]
    played = Played([])
    while True:
        waiting: dict[str, list[int]] = {}
        for i, e in enumerate(envs):
            if not _done(e):
                waiting.setdefault(e.agent_selection, []).append(i)
        if not waiting:
            break
        for seat, idx in waiting.items():
            if seat not in agents:
                raise KeyError(f"the env asks seat {seat!r} to act, but only {sorted(agents)} have agents")
            observations = [envs[i].observe(seat) for i in idx]
            seeds = None if seed_of is None else [seed_of(i, seat, len(seen[i])) for i in idx]
            t0 = time.perf_counter()
            actions = list(agents[seat].act(observations, seeds=seeds))
            played.acting_s += time.perf_counter() - t0
            if len(actions) != len(idx):
                raise ValueError(
                    f"the agent for seat {seat!r} returned {len(actions)} actions for {len(idx)} observations"
                )
            t0 = time.perf_counter()
            for i, obs, action in zip(idx, observations, actions, strict=True):
                seen[i].append((obs, action))
            steps = [lambda e=envs[i], a=action: e.step(a) for i, action in zip(idx, actions, strict=True)]
            scoring.step_concurrently(task, steps)
            played.stepping_s += time.perf_counter() - t0
    for i, (e, s) in enumerate(zip(envs, starts, strict=True)):
        results = tuple(e.results)
        if len(results) != len(seen[i]):
            raise RuntimeError(
                f"episode {i} (problem {s.problem_index}) scored {len(results)} turns "
                f"for {len(seen[i])} actions"
            )
        turns = tuple(
            Turn.of(result, i, obs, action) for (obs, action), result in zip(seen[i], results, strict=True)
        )
        problem_id = str(getattr(getattr(e, "problem", None), "id", s.problem_index))
        played.episodes.append(Episode(i, problem_id, s, turns))
    return played


__all__ = ["Episode", "Played", "SeedFn", "Start", "Turn", "play_episodes", "spawn"]
