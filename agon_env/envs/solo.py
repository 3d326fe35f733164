"""A single-agent Gymnasium view of draft-and-challenge, for code written against ``gymnasium.Env``.

Much RL code expects one agent, ``reset() -> (obs, info)`` and ``step(a) -> (obs, r,
terminated, truncated, info)``. :func:`solo` wraps any registered id as such an env:

* **drafting** (no ``opponent``): an episode is one drafting turn in the env's ``solo``
  mode. The observation is the bare problem; the reward is the drafter's ``2c + λφ``
  (plain GRPO's), and the episode terminates after the one step.
* **challenging** (``opponent=`` a policy, ``obs -> completion``): the opponent drafts
  inside ``reset`` (it is part of the environment, like a fixed opponent in any
  single-agent view of a game), so the agent's first observation already shows the
  draft's summary. The agent's one action is the challenge; the reward is the
  challenger's under the env's reward scheme (the conversion bonus by default).

Observations, actions and ``info`` are the AEC env's own (``{"text", "problem",
"draft", "role", "own", "words"}``, a completion string, the seat's ``infos`` entry), so a policy
trained here acts unchanged in the two-player env. Gymnasium's own registry has it too:
``gymnasium.make("agon/Solo-v0", env_id=..., opponent=...)``. ``reset(seed=s)`` seeds the problem
draw; a stochastic opponent is seeded by whoever builds it. It passes
``gymnasium.utils.env_checker.check_env`` (tested).

Which consumers of ``gymnasium.Env`` can use it depends on whether they take text
actions: see docs/envs.md, "A single-agent Gymnasium view".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium

from agon_env.json_value import JSONRecord
from agon_env.vocabulary import AGENT_A, ROLES

if TYPE_CHECKING:
    from pettingzoo import AECEnv

    from agon_env.envs.draft_challenge import Observation

Policy = Callable[["Observation"], object]
"""What an opponent is: an observation in, an action (a completion string or object with ``.text``) out."""


class SoloEnv(gymnasium.Env):
    """One player's side of a draft-and-challenge episode (see the module docstring)."""

    metadata = {"render_modes": ["ansi", "human"]}

    def __init__(self, aec_env: AECEnv, opponent: Policy | None = None) -> None:
        inner = aec_env.unwrapped
        if opponent is None and inner.mode != "solo":
            raise ValueError(
                f"without an opponent the episode is one drafting turn: build the env with "
                f"mode='solo' (got mode={inner.mode!r}), or pass opponent= to play the challenger"
            )
        if opponent is not None and not inner.spec_mode.two_seats:
            raise ValueError(f"mode {inner.mode!r} has one seat; an opponent needs a two-seat mode")
        self.aec = aec_env
        self.opponent = opponent
        self.seat = AGENT_A if opponent is None else inner.possible_agents[1]
        """The seat the agent plays: the drafter, or the challenger of a fixed drafter."""
        self.observation_space = inner.observation_space(self.seat)
        self.action_space = inner.action_space(self.seat)
        self.render_mode = inner.render_mode
        self._obs: Observation | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[Observation, JSONRecord]:
        super().reset(seed=seed)
        # The inner env draws the problem; deriving its seed from ours keeps one seed stream.
        inner_seed = None if seed is None else int(self.np_random.integers(2**31))
        drafter = AGENT_A if self.opponent is None else self.aec.unwrapped.possible_agents[0]
        self.aec.reset(seed=inner_seed, options={**(options or {}), "drafter": drafter})
        if self.opponent is not None:
            self.aec.step(self.opponent(self.aec.observe(drafter)))
        self._obs = self.aec.observe(self.seat)
        role = ROLES[self._obs["role"]]  # the same spelling as the seat's infos after step()
        return dict(self._obs), {"role": role, "problem_id": self.aec.unwrapped.problem.id}

    def step(self, action: object) -> tuple[Observation, SupportsFloat, bool, bool, JSONRecord]:
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        if self.aec.agent_selection != self.seat or self.aec.terminations.get(self.seat, True):
            raise RuntimeError("the episode is over (one turn per episode): call reset()")
        self.aec.step(action)
        reward = float(self.aec.unwrapped.rewards[self.seat])
        info = dict(self.aec.unwrapped.infos[self.seat])
        # The episode ends on the agent's one turn; the last observation is the one it acted on.
        return dict(self._obs), reward, True, False, info

    def render(self) -> str | None:
        return self.aec.render()

    def close(self) -> None:
        self.aec.close()


def solo(env_id: str = "agon/arith-v0", opponent: Policy | None = None, **kwargs: Any) -> SoloEnv:
    """``agon_env.make(env_id, **kwargs)`` seen by one agent (see the module docstring).

    Without ``opponent`` the env is built in ``solo`` mode (one drafting turn); with one,
    in ``challenge`` mode unless ``mode`` says otherwise (any ``exchange`` works too).
    """
    from agon_env.registry import make

    kwargs.setdefault("mode", "solo" if opponent is None else "challenge")
    return SoloEnv(make(env_id, **kwargs), opponent)


GYMNASIUM_ID = "agon/Solo-v0"
"""Where Gymnasium looks: ``gymnasium.make("agon/Solo-v0", env_id="agon/mbpp-v0")`` is :func:`solo`
inside Gymnasium's own checker and order wrappers, with ``env.spec`` set."""

if GYMNASIUM_ID not in gymnasium.registry:
    gymnasium.register(GYMNASIUM_ID, entry_point=solo, kwargs={"env_id": "agon/arith-v0"})
