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
``hidden``     two     ``challenge`` with ``exchange="none"``: the challenger sees only the
                       problem, rewarded against its own paired draft (hidden-draft cell)
=============  ======  =============================================================

Observations are ``{"text", "problem", "draft", "role", "own"}``. ``text`` is the user turn
the player reads, worded in one place (:func:`agon_env.envs.exchange.challenger_text`); an LLM agent
sends it verbatim after its system prompt and worked examples. ``problem`` and
``draft`` are its parts: ``draft`` is what the challenger is shown of the draft, as the
``exchange`` channel says (:data:`~agon_env.envs.exchange.CHANNELS`; by default its summary
without answer blocks, or ``NO_SUMMARY``), empty when none is shown (drafting, ``none``).
``role`` is 0 for drafting and 1 for challenging; ``own`` is 1 when the draft shown is the
reader's own (self mode). Actions are the agent's
whole completion: a ``str``, or any object with ``.text`` (and optionally
``.num_tokens``, used for length statistics and the tiebreak) such as an agent's
``Completion``. Any string is a legal action: malformed completions score format 0, and one outside
the action space (over ``max_text_length`` characters, or not valid Unicode) scores as an
empty completion with a warning; a non-string is refused.

At the end ``env.results`` holds one typed :class:`TurnResult` per turn (seat, role,
completion text, parsed answer, correctness, format, length, reward, what draft it
read), and ``infos[agent]`` the same as plain dicts: ``role``, ``correct``,
``format_ok``, ``chars``, ``tokens``, ``answer`` of its last turn, plus ``problem_id``,
``task``, ``rewards_by_role`` and ``turns`` (each of its turns).

Example::

    env = agon_env.make("agon/arith-v0", difficulty=2)
    env.reset(seed=0, options={"drafter": AGENT_A})
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        env.step(None if term or trunc else policy[agent](obs))
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces import Dict, Discrete
from pettingzoo import AECEnv

from agon_env.envs.exchange import CHANNELS, MAX_SUMMARY_CHARS, NO_SUMMARY, resolve_exchange
from agon_env.envs.format import Parsed, parse_completion
from agon_env.envs.rewards import Outcome, drafter_reward, episode_rewards, get_scheme
from agon_env.envs.scoring import Verdict, score_answer, warn_once
from agon_env.envs.spaces import UnicodeText
from agon_env.envs.tasks.base import Problem, Task
from agon_env.envs.tasks.verify import mentions_answer
from agon_env.vocabulary import AGENT_A, ROLES, SEATS, other_seat

DRAFT, CHALLENGE = 0, 1
"""Stages of an episode, and the observation's ``role`` field (``ROLES[i]`` names them)."""


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


@dataclass(frozen=True)
class TurnResult:
    """One scored turn of an episode, as the env judged it."""

    seat: str
    role: str
    """``drafter`` or ``challenger`` (self mode's second turn is a challenger turn)."""
    text: str
    """The completion the seat wrote."""
    answer: str | None
    """Content of its ``<answer>`` block, as the task scored it."""
    summary: str | None
    correct: bool
    format_ok: bool
    chars: int
    tokens: int | None
    """Completion tokens when the agent reported them (LLM agents do)."""
    reward: float
    """What this turn's role earned (a seat that plays twice gets one reward per turn)."""
    draft: str
    """What this turn was shown of the draft ('' when none: drafting, hidden mode)."""
    summary_leak: bool
    """The draft this turn was shown states the draft's final answer (answer block removed or not)."""
    score_error: str | None
    """Why the task's ``score`` gave no verdict (its traceback, or the non-bool it returned); scored 0."""
    score_timeout: bool
    """The task's verifier timed out on this answer: scored 0, counted apart from wrong answers."""

    @property
    def draft_unusable(self) -> bool:
        """A challenger turn shown :data:`NO_SUMMARY`: the draft gave it nothing to check."""
        return self.draft == NO_SUMMARY

    def outcome(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict, without the texts (what ``infos`` and reports keep)."""
        kept = {f.name: getattr(self, f.name) for f in fields(TurnResult) if f.name not in _TEXTS}
        return {**kept, "draft_unusable": self.draft_unusable, "score_error": self.score_error is not None}


_TEXTS = ("text", "summary", "draft", "score_error")


@dataclass(frozen=True)
class _Turn:
    agent: str
    text: str
    tokens: int | None
    parsed: Parsed
    outcome: Outcome
    draft: str
    summary_leak: bool
    verdict: Verdict


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
        redact_answer: bool = False,
        tiebreak_drafter: bool = False,
        exchange: str | None = None,
    ) -> None:
        """``exchange``: a row of :data:`~agon_env.envs.exchange.CHANNELS`; ``None`` is ``summary`` or what
        today's ``mode="hidden"`` (``none``) and ``redact_answer=True`` (``redacted``) imply."""
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
        self.exchange = resolve_exchange(mode, exchange, redact_answer)  # ValueError: unknown or contradicted
        self.channel = CHANNELS[self.exchange]
        self.redact_answer = self.exchange == "redacted"
        self.tiebreak_drafter = tiebreak_drafter
        self.render_mode = render_mode
        self.possible_agents = list(SEATS)
        text, flag = UnicodeText(max_text_length), Discrete(2)
        self._obs_space = Dict({"text": text, "problem": text, "draft": text, "role": flag, "own": flag})
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
            tiebreak_drafter=self.tiebreak_drafter,
            exchange=self.exchange,
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
        drafter = options.pop("drafter", AGENT_A)
        if drafter not in SEATS:
            raise ValueError(f"options['drafter'] must be one of {list(SEATS)}, got {drafter!r}")
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
        longest = len(self.channel.words(self.problem.prompt, "x" * MAX_SUMMARY_CHARS, False))
        if self.spec_mode.shows_draft and longest > self.max_text_length:  # refuse now, not mid-episode
            raise ValueError(
                f"problem {self.problem.id}: with a full-length summary its challenger observation is "
                f"{longest} characters, over max_text_length={self.max_text_length}; raise max_text_length"
            )
        self.problem_index = int(index)
        self.drafter = drafter
        other = other_seat(drafter)
        self.challenger = other if self.spec_mode.two_seats else drafter
        self.agents = [drafter, other] if self.spec_mode.two_seats else [drafter]
        self.stage = DRAFT
        self.turns: list[_Turn] = []
        self.results: tuple[TurnResult, ...] = ()
        self.final_rewards: dict[str, float] = {}
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = drafter

    def _role(self, agent: str) -> int:
        if self.spec_mode.two_seats:
            return DRAFT if agent == self.drafter else CHALLENGE
        return self.stage

    def _draft_shown(self, role: int) -> str:
        """What a turn in ``role`` reads of the draft ('' when it reads none)."""
        if role != CHALLENGE or not self.spec_mode.shows_draft or not self.turns:
            return ""
        return self.channel.show(self.problem.prompt, self.turns[0].text, self.turns[0].parsed)

    def _leaks(self, shown: str) -> bool:
        """Whether the shown draft states the draft's own final answer (the task's matching)."""
        answer = self.turns[0].parsed.answer if self.turns else None
        if not self.channel.text or not shown or shown == NO_SUMMARY or not answer:
            return False
        mentions = getattr(self.task, "mentions_answer", mentions_answer)
        return bool(mentions(shown, answer))

    def observe(self, agent: str) -> dict[str, Any]:
        role = self._role(agent)
        draft, problem, cap = self._draft_shown(role), self.problem.prompt, self.max_text_length
        own = int(bool(draft) and not self.spec_mode.two_seats)  # self mode reads its own draft
        text = self.channel.words(problem, draft, bool(own)) if draft else problem
        if len(text) > cap:  # a cut observation would silently hide the end of the problem or draft
            raise ValueError(
                f"problem {self.problem.id}: the observation is {len(text)} characters, over "
                f"max_text_length={cap}; raise max_text_length"
            )
        return {"text": text, "problem": problem, "draft": draft, "role": role, "own": own}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        text, tokens, outside = _action_text(action, self._act_space)
        if outside is not None:
            warnings.warn(
                f"{agent}'s completion is outside the action space ({outside}): scored as empty", stacklevel=2
            )
        parsed = parse_completion("" if outside else text)
        outcome, verdict = self._outcome(parsed, text, tokens)
        shown = self._draft_shown(self.stage)
        self.turns.append(_Turn(agent, text, tokens, parsed, outcome, shown, self._leaks(shown), verdict))
        self._cumulative_rewards[agent] = 0.0
        if self.stage == DRAFT and self.spec_mode.challenge:
            self.stage = CHALLENGE
            self.agent_selection = self.challenger
            self.rewards = {a: 0.0 for a in self.agents}
        else:
            self._finish()
        self._accumulate_rewards()

    def _outcome(self, parsed: Parsed, text: str, tokens: int | None) -> tuple[Outcome, Verdict]:
        verdict = score_answer(self.task, self.problem, parsed.answer) if parsed.answer else Verdict(False)
        warn_once(getattr(self.task, "name", type(self.task).__name__), verdict)
        length = tokens if tokens else len(text)
        return Outcome(correct=verdict.correct, format_ok=parsed.format_ok, length=length), verdict

    def _turn_rewards(self) -> list[float]:
        draft = self.turns[0].outcome
        if len(self.turns) == 1:
            return [drafter_reward(draft, self.lam)]
        second = self.turns[1].outcome
        scheme, lam, gamma = self.reward_scheme, self.lam, self.gamma
        return list(episode_rewards(draft, second, scheme, lam, gamma, self.tiebreak_drafter))

    def _finish(self) -> None:
        self.results = tuple(
            TurnResult(
                seat=t.agent,
                role=ROLES[i],
                text=t.text,
                answer=t.parsed.answer,
                summary=t.parsed.summary,
                correct=t.outcome.correct,
                format_ok=t.outcome.format_ok,
                chars=len(t.text),
                tokens=t.tokens,
                reward=reward,
                draft=t.draft,
                summary_leak=t.summary_leak,
                score_error=t.verdict.error,
                score_timeout=t.verdict.timeout,
            )
            for i, (t, reward) in enumerate(zip(self.turns, self._turn_rewards(), strict=True))
        )
        self.rewards = {a: float(sum(r.reward for r in self.results if r.seat == a)) for a in self.agents}
        self.final_rewards = dict(self.rewards)  # kept for render() after agents leave
        for agent in self.agents:
            turns = [r.outcome() for r in self.results if r.seat == agent]
            # Top-level keys describe the agent's last turn; ``turns`` keeps both in self mode.
            self.infos[agent] = {
                **turns[-1],
                "problem_id": self.problem.id,
                "task": getattr(self.task, "name", type(self.task).__name__),
                "rewards_by_role": {t["role"]: t["reward"] for t in turns},
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
                f"-- {ROLES[i]} {t.agent}: correct={t.outcome.correct} format_ok={t.outcome.format_ok} "
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


def _action_text(action: Any, space: UnicodeText) -> tuple[str, int | None, str | None]:
    """A live agent's completion text, its token count when the agent knows it, and why the
    text is outside the action space (``None`` when it is inside).

    The action is a ``str`` or an object with a ``str`` ``.text`` (an agent's ``Completion``);
    anything else -- ``None``, bytes, a number -- is refused, never decoded. A string outside
    the space (longer than ``max_text_length``, or not valid Unicode) is a completion the
    env does not read: it scores as an empty one, with a warning, so one runaway sample
    costs its turn but not the run.
    """
    text = str(action) if isinstance(action, np.str_) else getattr(action, "text", action)
    if not isinstance(text, str):
        what = "None (the action of an agent that is done)" if action is None else type(action).__name__
        raise TypeError(f"an action must be a completion str (or have a str .text), got {what}")
    tokens = getattr(action, "num_tokens", None)
    return text, int(tokens) if tokens else None, space.why_not(text)
