"""Draft-and-challenge: a two-player PettingZoo AEC environment for cross-model RL.

Two seats, ``agent_a`` and ``agent_b``, take turns on one problem from a task:

1. **Draft.** The drafter reads the bare problem and writes a completion in the
   paper's format: free reasoning, then ``<summary>…</summary>`` and ``<answer>…</answer>``.
2. **Challenge.** The challenger reads the problem plus the drafter's *summary* --
   never its reasoning, never its answer block -- and writes its own completion.
3. **Reward.** Both are scored by the task; the env emits rewards through a pluggable
   reward scheme (:mod:`agon_env.envs.rewards`) and terminates.

Modes (``mode=``), so that an algorithm picks its ablation with one switch:

=============  ======  =============================================================
mode           seats   what happens
=============  ======  =============================================================
``challenge``  two     the default above
``solo``       one     the drafter alone, rewarded ``2c + λφ`` (plain GRPO)
``self``       one     the drafter then reads its *own* summary and answers again
                       (self-refinement); its reward is the sum over both turns
``hidden``     two     the challenger sees only the problem, but its reward is
                       computed against its own paired draft (hidden-draft cell)
=============  ======  =============================================================

Observations are ``{"text", "problem", "draft", "role"}``: ``text`` is everything the
agent must read, ``problem`` and ``draft`` are its parts (so an agent can render its own
chat prompt), ``role`` is 0 for drafting and 1 for challenging. Actions are the agent's
whole completion: a ``str``, or any object with ``.text`` (and optionally
``.num_tokens``, used for length statistics and the tiebreak) such as an agent's
``Completion``. Any string is a legal action: malformed completions score format 0.

At the end ``infos[agent]`` holds ``role``, ``correct``, ``format_ok``, ``chars``,
``tokens``, ``problem_id``, ``task`` and ``rewards_by_role``.

Example::

    env = agon_env.make("agon/arith-v0", difficulty=2)
    env.reset(seed=0, options={"drafter": "agent_a"})
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        env.step(None if term or trunc else policy[agent](obs))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces import Dict, Discrete
from pettingzoo import AECEnv

from agon_env.envs.format import Parsed, parse_completion, strip_answer_blocks
from agon_env.envs.rewards import Outcome, drafter_reward, episode_rewards, get_scheme
from agon_env.envs.spaces import UnicodeText
from agon_env.envs.tasks.base import Problem, Task

AGENTS = ("agent_a", "agent_b")
DRAFTER, CHALLENGER = 0, 1
ROLE_NAMES = ("drafter", "challenger")
MAX_SUMMARY_CHARS = 4000
"""Summaries are cut here so a rambling draft cannot flood the rival's context."""


@dataclass(frozen=True)
class ModeSpec:
    two_seats: bool
    """Whether a second agent challenges (else the drafter's seat is the only one)."""
    challenge: bool
    """Whether there is a second turn at all."""
    shows_draft: bool
    """Whether the second turn reads the draft's summary."""


MODES: dict[str, ModeSpec] = {
    "challenge": ModeSpec(two_seats=True, challenge=True, shows_draft=True),
    "solo": ModeSpec(two_seats=False, challenge=False, shows_draft=False),
    "self": ModeSpec(two_seats=False, challenge=True, shows_draft=True),
    "hidden": ModeSpec(two_seats=True, challenge=True, shows_draft=False),
}


def challenger_text(problem: str, summary: str | None) -> str:
    """What the challenger reads: the problem and the rival's sanitised summary."""
    shown = strip_answer_blocks(summary or "").strip()[:MAX_SUMMARY_CHARS] or "(the draft gave no summary)"
    return f"{problem}\n\nA rival's draft, summarised (its final answer is hidden):\n{shown}"


@dataclass(frozen=True)
class Turn:
    agent: str
    chars: int
    tokens: int | None
    parsed: Parsed
    outcome: Outcome


class DraftChallengeEnv(AECEnv):
    """The draft-and-challenge game over any :class:`~agon_env.envs.tasks.base.Task`."""

    metadata = {
        "name": "agon_draft_challenge_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
    }

    def __init__(
        self,
        task: Task,
        mode: str = "challenge",
        reward_scheme: str = "conversion",
        lam: float = 0.5,
        gamma: float | None = None,
        max_text_length: int = 65536,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {sorted(MODES)}")
        get_scheme(reward_scheme)  # fail at construction, not at the first episode end
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if len(task) == 0:
            raise ValueError("the task has no problems")
        self.task = task
        self.mode, self.spec_mode = mode, MODES[mode]
        self.reward_scheme, self.lam, self.gamma = reward_scheme, lam, gamma
        self.max_text_length = max_text_length
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        text = UnicodeText(max_text_length)
        self._obs_space = Dict({"text": text, "problem": text, "draft": text, "role": Discrete(2)})
        self._act_space = UnicodeText(max_text_length)
        self._np_random, _ = gymnasium.utils.seeding.np_random(None)
        self.agents = []

    def spawn(self) -> DraftChallengeEnv:
        """A fresh env sharing this one's task (cheap: for running many episodes in lockstep)."""
        return type(self)(
            self.task,
            mode=self.mode,
            reward_scheme=self.reward_scheme,
            lam=self.lam,
            gamma=self.gamma,
            max_text_length=self.max_text_length,
            render_mode=self.render_mode,
        )

    def observation_space(self, agent: str) -> Dict:
        return self._obs_space

    def action_space(self, agent: str) -> UnicodeText:
        return self._act_space

    # -- episode ---------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._np_random, _ = gymnasium.utils.seeding.np_random(seed)
        options = dict(options or {})
        drafter = options.pop("drafter", AGENTS[0])
        if drafter not in AGENTS:
            raise ValueError(f"options['drafter'] must be one of {list(AGENTS)}, got {drafter!r}")
        index = options.pop("problem_index", None)
        if options:
            # PettingZoo's api_test passes arbitrary options, so unknown keys warn rather than fail.
            gymnasium.logger.warn(
                f"ignoring unknown reset options {sorted(options)}; known: drafter, problem_index"
            )
        if index is None:
            index = int(self._np_random.integers(len(self.task)))
        elif not 0 <= int(index) < len(self.task):
            raise IndexError(f"problem_index {index} is out of range for a task of {len(self.task)} problems")
        self.problem: Problem = self.task[int(index)]
        self.problem_index = int(index)
        self.drafter = drafter
        other = AGENTS[1 - AGENTS.index(drafter)]
        self.challenger = other if self.spec_mode.two_seats else drafter
        self.agents = [drafter, other] if self.spec_mode.two_seats else [drafter]
        self.stage = DRAFTER
        self.turns: list[Turn] = []
        self.final_rewards: dict[str, float] = {}
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = drafter

    def observe(self, agent: str) -> dict[str, Any]:
        role = (DRAFTER if agent == self.drafter else CHALLENGER) if self.spec_mode.two_seats else self.stage
        sees_draft = role == CHALLENGER and self.spec_mode.shows_draft and bool(self.turns)
        summary = self.turns[0].parsed.summary if sees_draft else None
        text = challenger_text(self.problem.prompt, summary) if sees_draft else self.problem.prompt
        draft = strip_answer_blocks(summary or "").strip()[:MAX_SUMMARY_CHARS]
        cap = self.max_text_length
        return {"text": text[:cap], "problem": self.problem.prompt[:cap], "draft": draft[:cap], "role": role}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        text, tokens = _action_text(action)
        parsed = parse_completion(text)
        self.turns.append(Turn(agent, len(text), tokens, parsed, self._outcome(parsed, text, tokens)))
        self._cumulative_rewards[agent] = 0.0
        if self.stage == DRAFTER and self.spec_mode.challenge:
            self.stage = CHALLENGER
            self.agent_selection = self.challenger
            self.rewards = {a: 0.0 for a in self.agents}
        else:
            self._finish()
        self._accumulate_rewards()

    def _outcome(self, parsed: Parsed, text: str, tokens: int | None) -> Outcome:
        correct = bool(parsed.answer) and self._score(parsed.answer or "")
        return Outcome(correct=correct, format_ok=parsed.format_ok, length=tokens if tokens else len(text))

    def _score(self, answer: str) -> bool:
        try:
            return bool(self.task.score(self.problem, answer))
        except Exception:  # a task bug on odd model text must not end a training run
            return False

    def _finish(self) -> None:
        by_role: dict[str, dict[str, float]] = {a: {} for a in self.agents}
        draft = self.turns[0].outcome
        if len(self.turns) == 1:
            by_role[self.drafter]["drafter"] = drafter_reward(draft, self.lam)
        else:
            ra, rb = episode_rewards(draft, self.turns[1].outcome, self.reward_scheme, self.lam, self.gamma)
            by_role[self.drafter]["drafter"] = ra
            by_role[self.challenger]["challenger"] = rb
        self.rewards = {a: float(sum(by_role[a].values())) for a in self.agents}
        self.final_rewards = dict(self.rewards)  # kept for render() after agents leave
        for agent in self.agents:
            turns = [
                {
                    "role": ROLE_NAMES[i],
                    "correct": t.outcome.correct,
                    "format_ok": t.outcome.format_ok,
                    "chars": t.chars,
                    "tokens": t.tokens,
                    "answer": t.parsed.answer,
                }
                for i, t in enumerate(self.turns)
                if t.agent == agent
            ]
            # Top-level keys describe the agent's last turn; ``turns`` keeps both in self mode.
            self.infos[agent] = {
                **turns[-1],
                "problem_id": self.problem.id,
                "task": getattr(self.task, "name", type(self.task).__name__),
                "rewards_by_role": by_role[agent],
                "turns": turns,
            }
        self.terminations = {a: True for a in self.agents}
        self.agent_selection = self.drafter

    def render(self) -> str | None:
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'human'")
            return None
        lines = [f"[{self.task.name} #{self.problem.id}] {self.problem.prompt}"]
        for i, t in enumerate(self.turns):
            lines.append(
                f"-- {ROLE_NAMES[i]} {t.agent}: correct={t.outcome.correct} format_ok={t.outcome.format_ok} "
                f"answer={t.parsed.answer!r}\n   summary: {t.parsed.summary!r}"
            )
        if self.final_rewards:
            lines.append(f"-- rewards: {self.final_rewards}")
        out = "\n".join(lines)
        if self.render_mode == "human":
            print(out)
            return None
        return out

    def close(self) -> None:
        pass


def _action_text(action: Any) -> tuple[str, int | None]:
    """The completion text of an action and its token count when the agent knows it."""
    if action is None:
        return "", None
    if isinstance(action, bytes):
        return action.decode("utf-8", errors="replace"), None
    if isinstance(action, str):
        return action, None
    if isinstance(action, np.str_):
        return str(action), None
    text = getattr(action, "text", None)
    if not isinstance(text, str):
        raise TypeError(f"an action must be a str or have a str .text attribute, got {type(action).__name__}")
    tokens = getattr(action, "num_tokens", None)
    return text, int(tokens) if tokens else None
