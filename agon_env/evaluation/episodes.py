"""Playing evaluation episodes in lockstep and reading their outcomes from the env.

One call of :func:`play` runs one episode per problem index through copies of an env
(``env.spawn()``), all at the same stage together, so every agent is asked once per
stage for the whole batch of problems. The env is driven only through the PettingZoo
AEC API and the agents only through :class:`~agon_env.agents.protocol.Agent`, so a
scripted agent in a test exercises exactly the path a LoRA adapter does.

Outcomes come from the env's ``infos`` (correctness is the task's verdict, never
re-judged here); each seat's ``turns`` list is merged into one drafter → challenger
sequence, which covers every mode: one turn (solo), two seats (challenge, hidden), or
one seat twice (self).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agon_env.agents.protocol import Agent
from agon_env.envs.lockstep import play_lockstep, spawn

_ROLE_ORDER = {"drafter": 0, "challenger": 1}


@dataclass(frozen=True)
class TurnRecord:
    role: str
    correct: bool
    format_ok: bool
    tokens: int | None
    chars: int


@dataclass(frozen=True)
class Episode:
    """One evaluated episode: the first turn (draft) and the last turn (the reported answer)."""

    problem_index: int
    problem_id: str
    seed: int
    turns: tuple[TurnRecord, ...]

    @property
    def correct(self) -> bool:
        return self.turns[-1].correct

    @property
    def first_correct(self) -> bool:
        return self.turns[0].correct

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem_index": self.problem_index,
            "problem_id": self.problem_id,
            "seed": self.seed,
            "correct": self.correct,
            "first_correct": self.first_correct,
            "format_ok": self.format_ok,
            "tokens": self.tokens,
            "chars": self.chars,
            "turns": [asdict(t) for t in self.turns],
        }


def seed_everything(seed: int) -> None:
    """Seed every RNG a sampling backend may draw from, so a (prompt batch, seed) pair repeats."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover - numpy is a hard dependency
        pass
    # A torch-based agent has imported torch by the time it acts; scripted agents need no torch.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def _episode_record(env: Any, index: int, seed: int) -> Episode:
    turns: list[dict[str, Any]] = []
    for agent in env.agents:
        info = env.infos.get(agent, {})
        turns.extend(info.get("turns") or ([info] if "correct" in info else []))
    if not turns:
        raise RuntimeError(f"episode on problem {index} ended without any scored turn in infos")
    turns.sort(key=lambda t: _ROLE_ORDER.get(t.get("role", ""), 2))
    records = tuple(
        TurnRecord(
            role=str(t.get("role", "")),
            correct=bool(t.get("correct", False)),
            format_ok=bool(t.get("format_ok", False)),
            tokens=int(t["tokens"]) if t.get("tokens") is not None else None,
            chars=int(t.get("chars", 0)),
        )
        for t in turns
    )
    problem_id = str(getattr(getattr(env, "problem", None), "id", index))
    return Episode(index, problem_id, seed, records)


def play(
    env: Any,
    seats: Mapping[str, Agent],
    problem_indices: Sequence[int],
    seed: int,
    drafter: str = "agent_a",
    before_act: Callable[[int], None] | None = seed_everything,
) -> list[Episode]:
    """One episode per problem index, in lockstep; returns them in the order given.

    ``seats`` maps env seats to agents; ``env`` is a template that is never stepped.
    ``before_act(seed + stage)`` runs before each agent call so that sampling repeats
    for the same batch and seed (stages get distinct seeds so a challenger's sampling
    noise is not a copy of its drafter's).
    """
    envs = [spawn(env) for _ in problem_indices]
    for e, index in zip(envs, problem_indices, strict=True):
        e.reset(seed=seed, options={"drafter": drafter, "problem_index": int(index)})
    stage = [0]

    def act(seat: str, idx: list[int], observations: list[Any]) -> Sequence[Any]:
        if seat not in seats:
            raise KeyError(f"the env asks seat {seat!r} to act, but only {sorted(seats)} have agents")
        if before_act is not None:
            before_act(seed * 1009 + stage[0])
        stage[0] += 1
        return seats[seat].act(observations)

    play_lockstep(envs, act)
    return [_episode_record(e, int(ix), seed) for e, ix in zip(envs, problem_indices, strict=True)]
