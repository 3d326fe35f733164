"""Driving many copies of an AEC env in lockstep, one batched decision per seat per stage.

Training rollouts (``agon_env.algorithms.rollout``) and evaluation episodes
(``agon_env.evaluation.episodes``) both play a batch of episodes the same way: every env
that waits on the same seat is served by one call that sees all their observations, so
an LLM agent samples the whole stage as one batch. This module owns that loop; it knows
nothing about models (``act`` is any callable) and drives the env only through the
PettingZoo AEC API (``agent_selection`` / ``observe`` / ``step`` / ``terminations`` /
``truncations``), so any AEC env can be played.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Act = Callable[[str, list[int], list[Any]], Sequence[Any]]
"""``(seat, env indices, observations) -> one action per observation``."""

OnStep = Callable[[int, str, Any, Any], None]
"""``(env index, seat, observation, action)``, called right before the env steps."""


@dataclass
class LockstepTiming:
    acting: float = 0.0
    """Seconds inside ``act`` (generation)."""
    stepping: float = 0.0
    """Seconds inside ``env.step`` (parsing, verification, rewards)."""


def spawn(env: Any) -> Any:
    """A fresh copy of ``env`` to play one episode in (the template is never stepped)."""
    # DraftChallengeEnv.spawn shares the (possibly large) task; other AEC envs get a copy.
    return env.spawn() if hasattr(env, "spawn") else copy.deepcopy(env)


def is_done(env: Any) -> bool:
    return all(env.terminations.get(a, False) or env.truncations.get(a, False) for a in env.agents)


def play_lockstep(envs: Sequence[Any], act: Act, on_step: OnStep | None = None) -> LockstepTiming:
    """Step every env to its end, asking ``act`` once per waiting seat per stage.

    ``envs`` must already be reset. Raises if ``act`` returns the wrong number of actions.
    """
    timing = LockstepTiming()
    while True:
        waiting: dict[str, list[int]] = {}
        for i, e in enumerate(envs):
            if not is_done(e):
                waiting.setdefault(e.agent_selection, []).append(i)
        if not waiting:
            return timing
        for seat, idx in waiting.items():
            observations = [envs[i].observe(seat) for i in idx]
            t0 = time.perf_counter()
            actions = list(act(seat, idx, observations))
            timing.acting += time.perf_counter() - t0
            if len(actions) != len(idx):
                raise ValueError(
                    f"the agent for seat {seat!r} returned {len(actions)} actions for {len(idx)} observations"
                )
            for i, obs, action in zip(idx, observations, actions, strict=True):
                if on_step is not None:
                    on_step(i, seat, obs, action)
                t0 = time.perf_counter()
                envs[i].step(action)
                timing.stepping += time.perf_counter() - t0
