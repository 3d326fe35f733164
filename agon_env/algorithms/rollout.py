"""Lockstep rollouts: B problems × N episodes through env copies, one agent call per stage.

Every episode of a step has the same drafter seat, so all envs wait on the same agent at
the same time: the drafter acts once on the whole batch of B·N observations, then the
challenger acts once on all of them (:func:`agon_env.envs.lockstep.play_lockstep`). The
env is driven only through the PettingZoo AEC API and agents only through
:class:`~agon_env.agents.protocol.Agent`, so any env or agent that speaks those
protocols can be rolled out.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agon_env.agents.protocol import Agent, Completion
from agon_env.envs.lockstep import play_lockstep, spawn

ROLE_NAMES = ("drafter", "challenger")


@dataclass
class Turn:
    """One completion in one episode, with the reward its role earned."""

    episode: int
    """Index into the batch: ``group * N + rollout``."""
    group: int
    """Which problem of the step (0..B-1); the N rollouts of a group share it."""
    seat: str
    role: str
    """``drafter`` or ``challenger`` (the second turn in self mode is a ``challenger`` turn)."""
    observation: Mapping[str, Any]
    completion: Completion
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutBatch:
    """All turns of one step, plus what the metrics need."""

    problem_indices: list[int]
    num_generations: int
    turns: list[Turn]
    seconds: float = 0.0
    """Wall time of the whole rollout."""
    gen_seconds: float = 0.0
    """Time inside ``agent.act`` (generation)."""
    score_seconds: float = 0.0
    """Time inside ``env.step`` (parsing, verification, rewards)."""

    def stream(self, role: str) -> list[Turn]:
        """The turns of one role in ``(group, rollout)`` order: one stream's GRPO batch."""
        return sorted((t for t in self.turns if t.role == role), key=lambda t: t.episode)

    def rewards(self, role: str) -> torch.Tensor:
        """``[B, N]`` rewards of one stream (the input to the group-relative advantages)."""
        turns = self.stream(role)
        if len(turns) != len(self.problem_indices) * self.num_generations:
            raise ValueError(f"stream {role!r} has {len(turns)} turns, not B×N; was that role played?")
        r = torch.tensor([t.reward for t in turns], dtype=torch.float32)
        return r.view(len(self.problem_indices), self.num_generations)

    def episodes(self) -> dict[int, dict[str, Turn]]:
        """``{episode: {role: turn}}`` for pairing drafts with their challenges."""
        out: dict[int, dict[str, Turn]] = {}
        for t in self.turns:
            out.setdefault(t.episode, {})[t.role] = t
        return out


def episode_seed(seed: int, episode: int, turn: int) -> int:
    """Sampling seed of one turn of one episode (``episode`` is the global index)."""
    return (seed * 1_000_003 + episode * 7_919 + turn) % 2**62


def _act(agent: Agent, observations: list[Any], seeds: list[int]) -> list[Completion]:
    # Per-observation seeds make rollouts independent of batching and sharding; an agent
    # written before the protocol grew ``seeds`` still works, without that guarantee.
    params = inspect.signature(agent.act).parameters
    if "seeds" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return agent.act(observations, seeds=seeds)
    return agent.act(observations)


def rollout(
    env: Any,
    agents: Mapping[str, Agent],
    problem_indices: Sequence[int],
    num_generations: int,
    drafter: str,
    seed: int = 0,
    episode_offset: int = 0,
) -> RolloutBatch:
    """Play ``len(problem_indices) × num_generations`` episodes in lockstep.

    ``agents`` maps seats to agents (one-seat modes only need the drafter's seat).
    ``env`` is a template: it is never stepped itself. Rewards per role come from
    ``infos[seat]["rewards_by_role"]`` so a seat that plays both roles (self mode)
    gets each turn's own reward, falling back to ``rewards[seat]`` for other envs.

    Episode ``i`` is seeded by its global index ``episode_offset + i`` (env reset and
    each turn's sampling seed), so a data-parallel rank that plays a shard of a batch
    plays exactly the episodes one process would play for that shard.
    """
    start = time.perf_counter()
    n = num_generations
    envs = [spawn(env) for _ in range(len(problem_indices) * n)]
    for i, e in enumerate(envs):
        options = {"drafter": drafter, "problem_index": int(problem_indices[i // n])}
        e.reset(seed=seed + episode_offset + i, options=options)
    turns: list[Turn] = []
    turn_count = [0] * len(envs)

    def act(seat: str, idx: list[int], observations: list[Any]) -> list[Completion]:
        if seat not in agents:
            raise KeyError(f"the env asks seat {seat!r} to act, but only {sorted(agents)} have agents")
        seeds = [episode_seed(seed, episode_offset + i, turn_count[i]) for i in idx]
        return _act(agents[seat], observations, seeds)

    def record(i: int, seat: str, obs: Any, completion: Any) -> None:
        role = ROLE_NAMES[min(int(obs.get("role", turn_count[i])), 1)]
        turns.append(Turn(i, i // n, seat, role, obs, completion))
        turn_count[i] += 1

    timing = play_lockstep(envs, act, record)
    for t in turns:
        e = envs[t.episode]
        info = dict(e.infos.get(t.seat, {}))
        # A seat that played twice (self mode) lists each turn's own view under "turns".
        own = next((x for x in info.get("turns", ()) if x.get("role") == t.role), None)
        info.update(own or {})
        by_role = info.get("rewards_by_role") or {}
        t.reward = float(by_role.get(t.role, e.rewards.get(t.seat, 0.0)))
        t.info = info
    seconds = time.perf_counter() - start
    return RolloutBatch(list(problem_indices), n, turns, seconds, timing.acting, timing.stepping)
