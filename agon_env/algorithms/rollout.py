"""Lockstep rollouts: B problems × N episodes through env copies, one agent call per stage.

Every episode of a step has the same drafter seat, so all envs wait on the same agent at
the same time: the drafter acts once on the whole batch of B·N observations, then the
challenger acts once on all of them. The env is driven only through the PettingZoo AEC
API (``reset`` / ``agent_selection`` / ``observe`` / ``step`` / ``rewards`` / ``infos``),
and agents only through :class:`~agon_env.agents.protocol.Agent`, so any env or agent
that speaks those protocols can be rolled out.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agon_env.agents.protocol import Agent, Completion

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


def _spawn(env: Any) -> Any:
    # DraftChallengeEnv.spawn shares the (possibly large) task; other AEC envs get a copy.
    return env.spawn() if hasattr(env, "spawn") else copy.deepcopy(env)


def _done(env: Any) -> bool:
    return all(env.terminations.get(a, False) or env.truncations.get(a, False) for a in env.agents)


def rollout(
    env: Any,
    agents: Mapping[str, Agent],
    problem_indices: Sequence[int],
    num_generations: int,
    drafter: str,
    seed: int = 0,
) -> RolloutBatch:
    """Play ``len(problem_indices) × num_generations`` episodes in lockstep.

    ``agents`` maps seats to agents (one-seat modes only need the drafter's seat).
    ``env`` is a template: it is never stepped itself. Rewards per role come from
    ``infos[seat]["rewards_by_role"]`` so a seat that plays both roles (self mode)
    gets each turn's own reward, falling back to ``rewards[seat]`` for other envs.
    """
    start = time.perf_counter()
    n = num_generations
    envs = [_spawn(env) for _ in range(len(problem_indices) * n)]
    for i, e in enumerate(envs):
        e.reset(seed=seed + i, options={"drafter": drafter, "problem_index": int(problem_indices[i // n])})
    turns: list[Turn] = []
    turn_count = [0] * len(envs)
    gen = score = 0.0
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
            t0 = time.perf_counter()
            completions = agents[seat].act(observations)
            gen += time.perf_counter() - t0
            if len(completions) != len(idx):
                got = len(completions)
                raise ValueError(f"agent {seat!r} returned {got} completions for {len(idx)} observations")
            for i, obs, completion in zip(idx, observations, completions, strict=True):
                role = ROLE_NAMES[min(int(obs.get("role", turn_count[i])), 1)]
                turns.append(Turn(i, i // n, seat, role, obs, completion))
                turn_count[i] += 1
                t0 = time.perf_counter()
                envs[i].step(completion)
                score += time.perf_counter() - t0
    for t in turns:
        e = envs[t.episode]
        info = dict(e.infos.get(t.seat, {}))
        # A seat that played twice (self mode) lists each turn's own view under "turns".
        own = next((x for x in info.get("turns", ()) if x.get("role") == t.role), None)
        info.update(own or {})
        by_role = info.get("rewards_by_role") or {}
        t.reward = float(by_role.get(t.role, e.rewards.get(t.seat, 0.0)))
        t.info = info
    return RolloutBatch(list(problem_indices), n, turns, time.perf_counter() - start, gen, score)
