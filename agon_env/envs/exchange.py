"""What passes from drafter to challenger, worded once: the exchange channels and the user turn.

One env keyword, ``exchange``, picks a row of :data:`CHANNELS`:

============  ==============================================================================
channel       what the challenger's observation carries of the draft
============  ==============================================================================
``summary``   the draft's summary with every answer block removed, capped (the paper; default)
``redacted``  the same with every statement of the draft's result blanked (``[withheld]``)
``trace``     the whole completion (reasoning and summary) with every answer block removed
``none``      nothing: the bare problem, rewarded against its unseen paired draft (hidden)
``latent``    no draft text: an opaque handle naming the draft (``vocabulary.draft_handle``); the
              agents layer resolves it to the draft's KV cache (:mod:`agon_env.agents.latent`)
============  ==============================================================================

Today's names still load: ``mode="hidden"`` is ``exchange="none"`` and
``redact_answer=True`` is ``exchange="redacted"`` (:func:`resolve_exchange`). The
challenger never reads the draft's ``<answer>`` block in any channel. When a text channel
has nothing to show (no usable summary, an empty trace) it shows :data:`NO_SUMMARY`, and
the challenger still plays the challenger.

:func:`~agon_env.vocabulary.challenger_text` words the text channels' user turn and
:func:`~agon_env.vocabulary.latent_text` the latent one; the env puts it in the observation's
``text`` and an LLM agent sends that verbatim (its worked examples are rendered through the
same functions). They live in :mod:`agon_env.vocabulary`, with the latent handle
(:func:`~agon_env.vocabulary.draft_handle`), because the agents speak them too and import no
env. A summary may still state the result in
words ("Six sevens are 42."); the env measures how often (``summary_leak``), see
:func:`agon_env.envs.tasks.verify.mentions_answer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agon_env.envs.format import Parsed, strip_answer_blocks
from agon_env.envs.tasks.verify import redact_answer
from agon_env.vocabulary import challenger_text, draft_handle, latent_text, trace_text

MAX_SUMMARY_CHARS = 4000
"""Shown drafts are cut here so a rambling draft cannot flood the rival's context."""
NO_SUMMARY = "(the draft gave no usable summary)"
"""Shown in place of the draft when a text channel has nothing of it to show."""


def shown_draft(summary: str | None) -> str:
    """What the challenger is shown of a draft: its summary without answer blocks, capped."""
    return strip_answer_blocks(summary or "").strip()[:MAX_SUMMARY_CHARS] or NO_SUMMARY


Shown = Callable[[str, str, Parsed], str]
"""``(problem, draft completion text, parsed draft) -> what the challenger is shown ('' = nothing)``."""


def _summary(problem: str, text: str, parsed: Parsed) -> str:
    return shown_draft(parsed.summary)


def _redacted(problem: str, text: str, parsed: Parsed) -> str:
    shown = shown_draft(parsed.summary)
    return shown if shown == NO_SUMMARY else redact_answer(shown, parsed.answer)


def _trace(problem: str, text: str, parsed: Parsed) -> str:
    return strip_answer_blocks(text).strip()[:MAX_SUMMARY_CHARS] or NO_SUMMARY


def _none(problem: str, text: str, parsed: Parsed) -> str:
    return ""


def _latent(problem: str, text: str, parsed: Parsed) -> str:
    return draft_handle(problem, text)


@dataclass(frozen=True)
class Channel:
    """One way the draft reaches the challenger."""

    name: str
    show: Shown
    """What a challenger observation's ``draft`` holds."""
    words: Callable[[str, str, bool], str] = challenger_text
    """``(problem, shown draft, own) -> the user turn`` when something is shown."""
    text: bool = True
    """The shown draft is text the model reads (``summary_leak`` is measured on it)."""
    reasoning: bool = False
    """The challenger reads the draft's reasoning (``trace``); the conformance check holds it to that."""
    latent: bool = False
    """The draft reaches the challenger as its KV cache (``draft`` is a :func:`draft_handle`)."""


CHANNELS: dict[str, Channel] = {
    c.name: c
    for c in (
        Channel("summary", _summary),
        Channel("redacted", _redacted),
        Channel("trace", _trace, words=trace_text, reasoning=True),
        Channel("none", _none, text=False),
        Channel("latent", _latent, words=latent_text, text=False, latent=True),
    )
}
"""The exchange channels by name (the env keyword ``exchange``, ``agon train --exchange``)."""
DEFAULT = "summary"


def resolve_exchange(mode: str, exchange: str | None, redact: bool = False) -> str:
    """The channel an env runs: ``exchange``, or the one today's names imply.

    ``mode="hidden"`` implies ``none`` and ``redact_answer=True`` implies ``redacted`` (old
    configs keep loading); an explicit ``exchange`` that contradicts them is refused.
    """
    implied = "none" if mode == "hidden" else "redacted" if redact else None
    if exchange is None:
        return implied or DEFAULT
    if exchange not in CHANNELS:
        raise ValueError(f"unknown exchange {exchange!r}; choose one of {list(CHANNELS)}")
    if implied is not None and exchange != implied:
        why = "mode='hidden'" if mode == "hidden" else "redact_answer=True"
        raise ValueError(f"{why} is exchange={implied!r}, but exchange={exchange!r} was given; drop one")
    return exchange
