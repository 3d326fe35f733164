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
=============  ======  =============================================================

Observations are ``{"text", "problem", "draft", "role", "own", "words"}``. ``text`` is the user turn
the player reads, worded in one place (:func:`agon_env.vocabulary.challenger_text`); an LLM agent
sends it verbatim after its system prompt and worked examples. ``problem`` and
``draft`` are its parts: ``draft`` is what the challenger is shown of the draft, as the
``exchange`` channel says (:data:`~agon_env.envs.exchange.CHANNELS`; by default its summary
without answer blocks, or ``NO_SUMMARY``), empty when none is shown (drafting, ``none``).
``role`` is 0 for drafting and 1 for challenging; ``own`` is 1 when the draft shown is the
reader's own (self mode); ``words`` names the channel's wording of the challenger's turn (one
of :data:`agon_env.vocabulary.WORDINGS`), by which an agent words its worked examples. Actions are the agent's
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

import math
import numbers
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypedDict

import gymnasium
import numpy as np
from gymnasium.spaces import Dict, Discrete
from pettingzoo import AECEnv

from agon_env.envs.exchange import CHANNELS, MAX_SUMMARY_CHARS, NO_SUMMARY, Channel
from agon_env.envs.format import Parsed
from agon_env.envs.rewards import (
    Outcome,
    drafter_reward,
    episode_rewards,
    get_scheme,
)
from agon_env.envs.scoring import Verdict, judge, score_limit
from agon_env.envs.spaces import UnicodeText
from agon_env.envs.tasks.base import Problem, Task
from agon_env.envs.tasks.errors import EnvOptionError
from agon_env.envs.tasks.verify import mentions_answer
from agon_env.envs.turns import TurnRecord, TurnResult, read_action
from agon_env.json_value import JSONRecord
from agon_env.options import EnvOptions
from agon_env.vocabulary import AGENT_A, CHALLENGE, DRAFT, ROLES, SEATS, other_seat


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
}


RANGES: dict[str, tuple[Callable[[object], bool], str]] = {
    "mode": (lambda v: v in MODES, f"unknown mode; choose one of {sorted(MODES)}"),
    "lam": (lambda v: math.isfinite(v) and v >= 0, "the format weight must be a finite number ≥ 0"),
    "gamma": (
        lambda v: v is None or (math.isfinite(v) and v >= 0),
        "the length tiebreak must be a finite number ≥ 0, or None (off)",
    ),
    "max_text_length": (lambda v: v >= 1, "must be 1 or more characters"),
    "render_mode": (lambda v: v in (None, "ansi", "human"), "choose 'ansi', 'human' or None"),
    "exchange": (lambda v: v in CHANNELS, f"unknown exchange; choose one of {list(CHANNELS)}"),
}
"""Each keyword's range beyond its type (its :class:`EnvOptions` annotation), with the fix."""


def _fits(value: object, annotation: object) -> bool:
    """Whether ``value`` has the type ``annotation`` names (a bool is no number; an int is a float)."""
    if annotation is Any:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, (bool, np.bool_))
    if annotation in (int, float):
        wanted = numbers.Integral if annotation is int else numbers.Real
        return isinstance(value, wanted) and not isinstance(value, (bool, np.bool_))
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True  # a generic this check does not read: the env's own use decides


def _type_name(annotation: object) -> str:
    return " | ".join(
        "None" if a is type(None) else getattr(a, "__name__", str(a))
        for a in (typing.get_args(annotation) or (annotation,))
    )


def option_problems(options: EnvOptions) -> list[str]:
    """What is wrong with ``options``, one ``name = value: fix`` line per keyword (empty: nothing).

    The one check of the env's keywords, typed and in range (finite weights, no negatives): the
    env runs it on construction, so ``make()`` and ``spawn()`` get it, and a training config's
    ``env.<name>`` keys (flags, presets, ``config.yaml``) get it from its validation. A field
    that is a class variable there (``mode`` in ``EnvConfig``) is not checked.
    """
    hints = typing.get_type_hints(type(options))
    problems = []
    for f in fields(options):
        value = getattr(options, f.name)
        if not _fits(value, hints.get(f.name, Any)):
            wanted, got = _type_name(hints[f.name]), type(value).__name__
            problems.append(f"{f.name} = {value!r}: must be {wanted}, not {got}")
            continue
        ok, fix = RANGES.get(f.name, (lambda _v: True, ""))
        if not ok(value):
            problems.append(f"{f.name} = {value!r}: {fix}")
    if isinstance(getattr(options, "reward_scheme", None), str):
        try:
            get_scheme(options.reward_scheme)
        except ValueError as exc:
            problems.append(f"reward_scheme = {options.reward_scheme!r}: {exc}")
    return problems


class Observation(TypedDict):
    """What a seat observes (see the module docstring): the user turn, its parts, whose turn."""

    text: str
    problem: str
    draft: str
    role: int
    own: int
    words: str


class DraftChallengeEnv(AECEnv):
    """The draft-and-challenge game over any :class:`~agon_env.envs.tasks.base.Task`.

    Built as ``DraftChallengeEnv(task, **keywords)`` or ``DraftChallengeEnv(task, options)``,
    the keywords being :class:`EnvOptions`' fields; each is also an attribute (``env.mode``).
    """

    metadata = {
        "name": "agon_draft_challenge_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
    }
    options_type: ClassVar[type[EnvOptions]] = EnvOptions
    """The keywords' dataclass; a subclass with more keywords sets its own subclass of it."""

    task: Task  # the problems, shared by every spawn()
    spec_mode: ModeSpec  # what ``mode`` means (MODES[mode])
    problem: Problem  # this episode's problem (from reset)
    problem_index: int  # its index in ``task``
    drafter: str  # the seat that drafts this episode
    challenger: str  # the seat that plays the second turn (the drafter again in self mode)
    stage: int  # DRAFT, then CHALLENGE once the draft is in
    turns: list[TurnRecord]  # the turns played so far, as played
    channel: Channel  # what the challenger is shown of the draft (the CHANNELS row exchange resolves to)
    results: tuple[TurnResult, ...]  # every turn as scored, once the episode is over; () before
    final_rewards: dict[str, float]  # each seat's episode reward, kept for render() after agents leave

    def __init__(self, task: Task, options: EnvOptions | None = None, **keywords: Any) -> None:
        super().__init__()
        chosen = self.options_type(**{**(vars(options) if options else {}), **keywords})
        problems = option_problems(chosen)  # at construction, not at the first step or episode end
        if problems:
            raise EnvOptionError(f"env keyword {'; '.join(problems)}")
        if len(task) == 0:
            raise ValueError("the task has no problems")
        score_limit(task)  # a bad score_timeout fails here, not at the first answer
        self.task = task
        for f in fields(chosen):  # one attribute per keyword: env.lam, env.mode, ...
            setattr(self, f.name, getattr(chosen, f.name))
        self.spec_mode = MODES[self.mode]
        if self.exchange not in CHANNELS:
            raise EnvOptionError(f"unknown exchange {self.exchange!r}; choose one of {list(CHANNELS)}")
        self.channel = CHANNELS[self.exchange]
        self.possible_agents = list(SEATS)
        text, flag = UnicodeText(self.max_text_length), Discrete(2)
        self._obs_space = Dict(
            {"text": text, "problem": text, "draft": text, "role": flag, "own": flag, "words": text}
        )
        self._act_space = UnicodeText(self.max_text_length)
        self._np_random, _ = gymnasium.utils.seeding.np_random(None)
        self.agents = []

    @classmethod
    def keywords(cls) -> frozenset[str]:
        """The keywords this env takes besides the task (what ``agon_env.make`` routes to it)."""
        return frozenset(f.name for f in fields(cls.options_type))

    @property
    def options(self) -> EnvOptions:
        """The env's keywords as one :class:`EnvOptions`, read from its attributes."""
        return self.options_type(**{name: getattr(self, name) for name in self.keywords()})

    def spawn(self) -> DraftChallengeEnv:
        """A fresh env sharing this one's task (cheap: for running many episodes in lockstep)."""
        return type(self)(self.task, self.options)

    def observation_space(self, agent: str) -> Dict:
        return self._obs_space

    def action_space(self, agent: str) -> UnicodeText:
        return self._act_space

    # -- episode ---------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict[str, object] | None = None) -> None:
        if seed is not None:
            self._np_random, _ = gymnasium.utils.seeding.np_random(seed)
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(
                f"reset(options=...) takes a dict such as {{'drafter': 'agent_b', 'problem_index': 3}}, "
                f"not {type(options).__name__} {options!r:.80}"
            )
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
        self.problem = self.task[int(index)]
        longest = len(self.channel.words(self.problem.prompt, "x" * MAX_SUMMARY_CHARS, False))
        # Refused now, not mid-episode; a channel that shows no draft text has nothing to overflow.
        if self.spec_mode.shows_draft and self.channel.text and longest > self.max_text_length:
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
        self.turns = []
        self.results = ()
        self.final_rewards = {}
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: dict[str, JSONRecord] = {a: {} for a in self.agents}
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

    def last(self, observe: bool = True) -> tuple[Observation | None, float, bool, bool, JSONRecord]:
        if not self.agents:  # PettingZoo's own last() would end in a bare KeyError: 'agent_a'
            raise RuntimeError(
                "last(): the episode is over and every agent has left (env.agents is empty); "
                "call reset() to play another"
            )
        return super().last(observe)

    def observe(self, agent: str) -> Observation:
        role = self._role(agent)
        draft, problem, cap = self._draft_shown(role), self.problem.prompt, self.max_text_length
        own = int(bool(draft) and not self.spec_mode.two_seats)  # self mode reads its own draft
        text = self.channel.words(problem, draft, bool(own)) if draft else problem
        if len(text) > cap:  # a cut observation would silently hide the end of the problem or draft
            raise ValueError(
                f"problem {self.problem.id}: the observation is {len(text)} characters, over "
                f"max_text_length={cap}; raise max_text_length"
            )
        words = self.channel.words.__name__  # the agents word their worked examples by it
        return {"text": text, "problem": problem, "draft": draft, "role": role, "own": own, "words": words}

    def step(self, action: object) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        read = read_action(action, self._act_space)
        text, tokens, parsed = read.text, read.tokens, read.parsed
        if read.outside is not None:
            warnings.warn(
                f"{agent}'s completion is outside the action space ({read.outside}): scored as empty",
                stacklevel=2,
            )
        outcome, verdict = self._outcome(parsed, text, tokens)
        shown = self._draft_shown(self.stage)
        self.turns.append(
            TurnRecord(agent, text, tokens, parsed, outcome, shown, self._leaks(shown), verdict)
        )
        self._cumulative_rewards[agent] = 0.0
        if self.stage == DRAFT and self.spec_mode.challenge:
            self.stage = CHALLENGE
            self.agent_selection = self.challenger
            self.rewards = {a: 0.0 for a in self.agents}
        else:
            self._finish()
        self._accumulate_rewards()

    def _outcome(self, parsed: Parsed, text: str, tokens: int | None) -> tuple[Outcome, Verdict]:
        return judge(self.task, self.problem, parsed, tokens if tokens else len(text))

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
