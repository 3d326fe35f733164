"""One turn of an episode: the action read as text, the turn as played, and as scored.

The env reads each action with :func:`read_action` (:func:`action_text`, then the parse),
keeps the played turn as a :class:`TurnRecord` until the episode ends, then reports it as a
:class:`TurnResult` (``env.results``; ``infos`` keeps :meth:`TurnResult.outcome`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from agon_env.envs.exchange import NO_SUMMARY
from agon_env.envs.format import Parsed, parse_completion
from agon_env.envs.rewards import Outcome
from agon_env.envs.scoring import Verdict
from agon_env.envs.spaces import UnicodeText
from agon_env.json_value import JSONRecord
from agon_env.vocabulary import is_handle


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
    """What this turn was shown of the draft ('' when none: drafting, the ``none`` channel)."""
    summary_leak: bool
    """The draft this turn was shown states the draft's final answer (answer block removed or not)."""
    score_error: str | None
    """Why the task's ``score`` gave no verdict (its traceback, or the non-bool it returned); scored 0."""
    score_timeout: bool
    """The task's verifier timed out on this answer: scored 0, counted apart from wrong answers."""

    @property
    def verdict(self) -> bool | None:
        """:attr:`correct`, or ``None`` when the task gave no verdict (its ``score`` raised,
        returned a non-verdict or timed out): unjudged, which every rate leaves out rather than
        counting wrong (:func:`agon_env.stats.judged`)."""
        return None if self.score_error is not None or self.score_timeout else self.correct

    @property
    def draft_unusable(self) -> bool:
        """A challenger turn shown :data:`NO_SUMMARY`: the draft gave it nothing to check."""
        return self.draft == NO_SUMMARY

    @property
    def leak_measured(self) -> bool:
        """Whether :attr:`summary_leak` was measured: a challenger turn shown a usable draft as
        text. A latent handle is no text, so what its cache states is not measured (and not 0)."""
        return bool(self.draft) and not self.draft_unusable and not is_handle(self.draft)

    def outcome(self) -> JSONRecord:
        """The verdict as a JSON-ready dict, without the texts (what ``infos`` and reports keep);
        ``summary_leak`` is ``None`` where it was not measured (:attr:`leak_measured`)."""
        kept = {f.name: getattr(self, f.name) for f in fields(TurnResult) if f.name not in _TEXTS}
        leak = self.summary_leak if self.leak_measured else None  # not measured is not "no leak"
        return {
            **kept,
            "verdict": self.verdict,
            "draft_unusable": self.draft_unusable,
            "summary_leak": leak,
            "score_error": self.score_error is not None,
        }


_TEXTS = ("text", "summary", "draft", "score_error")


@dataclass(frozen=True)
class TurnRecord:
    """A turn as played, before the episode's rewards are known (``env.turns`` holds them)."""

    agent: str
    text: str
    tokens: int | None
    parsed: Parsed
    outcome: Outcome
    draft: str
    summary_leak: bool
    verdict: Verdict


def action_text(action: object, space: UnicodeText) -> tuple[str, int | None, str | None]:
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


@dataclass(frozen=True)
class ReadAction:
    """An action as the env reads it: its text, token count, why it is outside the action space
    (``None`` when inside) and the parse the env scores (an outside one's: an empty completion's)."""

    text: str
    tokens: int | None
    outside: str | None
    parsed: Parsed

    @property
    def length(self) -> int:
        """What the scorer is told the completion's length is: its tokens when known, else characters."""
        return self.tokens if self.tokens else len(self.text)


def read_action(action: object, space: UnicodeText) -> ReadAction:
    """How the env reads ``action`` before scoring it, in one place: :func:`action_text`, then the
    parse of the text (of nothing when the text is outside ``space``). The TRL reward reads its
    completions through this too, so both score the same text the same way."""
    text, tokens, outside = action_text(action, space)
    return ReadAction(text, tokens, outside, parse_completion("" if outside else text))
