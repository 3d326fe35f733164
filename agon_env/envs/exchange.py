"""What passes from drafter to challenger, worded once: the exchange channels and the user turn.

One env keyword, ``exchange``, picks a row of :data:`CHANNELS`:

============  ==============================================================================
channel       what the challenger's observation carries of the draft
============  ==============================================================================
``summary``   the draft's summary up to its first answer tag, capped (the paper; default)
``redacted``  the same with every statement of the draft's result blanked (``[withheld]``)
``trace``     the whole completion (reasoning and summary) up to its first answer tag
``none``      nothing: the bare problem, rewarded against its unseen paired draft (hidden)
``latent``    no draft text: an opaque handle naming the draft (``vocabulary.draft_handle``); the
              agents layer resolves it to the draft's KV cache (:mod:`agon_env.agents.latent`)
============  ==============================================================================

What else differs between channels is a property of the row, read where it matters: whether
the shown draft is text the model reads, whether it carries the reasoning, and whether it
travels as the drafter's KV cache (which the agents must record, which only some generation
backends can inject, and which gradient checkpointing would drop). No code outside this
table and the latent modules names a channel. Every channel reads a draft by one rule,
:func:`agon_env.blocks.given` (its ``part``: the summary, or the whole completion for ``trace``
and the latent ``completion`` span): what comes before the draft's first answer tag, so the
challenger never reads an ``<answer>`` block in any channel. When that is nothing (no summary,
an empty, whitespace-only or answer-only one, a summary written after the answer) a text
channel shows :data:`NO_SUMMARY`, the latent channel reads no cache, and the turn counts as
``draft_unusable`` in either; the challenger still plays the challenger.

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

from agon_env.blocks import given
from agon_env.envs.format import Parsed
from agon_env.envs.tasks.verify import redact_answer
from agon_env.vocabulary import (
    VLLM_REFUSAL,
    WORDINGS,
    Words,
    challenger_text,
    draft_handle,
    latent_text,
    trace_text,
)

MAX_SUMMARY_CHARS = 4000
"""Shown drafts are cut here so a rambling draft cannot flood the rival's context."""
NO_SUMMARY = "(the draft gave no usable summary)"
"""Shown in place of the draft when a text channel has nothing of it to show."""
SUMMARY_CLOSE = "</summary>"
"""The tag after which a ``summary_only`` channel reads nothing more of a draft."""


def shown_draft(text: str, part: str = "summary") -> str:
    """What a text channel shows of the draft completion ``text``: what :func:`~agon_env.blocks.given`
    gives of its ``part``, capped; :data:`NO_SUMMARY` when that is nothing."""
    lo, hi = given(text, part).content
    return text[lo:hi][:MAX_SUMMARY_CHARS] or NO_SUMMARY


Shown = Callable[[str, str, Parsed], str]
"""``(problem, draft completion text, parsed draft) -> what the challenger is shown ('' = nothing)``."""


def _summary(problem: str, text: str, parsed: Parsed) -> str:
    return shown_draft(text)


def _redacted(problem: str, text: str, parsed: Parsed) -> str:
    shown = shown_draft(text)
    return shown if shown == NO_SUMMARY else redact_answer(shown, parsed.answer)


def _trace(problem: str, text: str, parsed: Parsed) -> str:
    return shown_draft(text, "completion")


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
    words: Words = challenger_text
    """``(problem, shown draft, own) -> the user turn`` when something is shown: one of
    :data:`~agon_env.vocabulary.WORDINGS`, which the observation names (``words``) so the agents'
    worked examples are worded the same."""
    text: bool = True
    """The shown draft is text the model reads (``summary_leak`` is measured on it)."""
    reasoning: bool = False
    """The challenger reads the draft's reasoning (``trace``); the conformance check holds it to that."""
    cache: bool = False
    """The draft reaches the challenger as its KV cache (``draft`` is a :func:`draft_handle`): the
    seats must record their drafts (:func:`agon_env.agents.latent.latent_agents`), a text-only
    reader (``agon probe``'s) has nothing to read, and gradient checkpointing, which drops a
    stored cache, cannot train it."""
    backends: tuple[str, ...] | None = None
    """The generation backends that can run it (``None``: every one)."""
    refusal: str = ""
    """The one line that refuses it on another backend."""
    summary: bool = True
    """The shown draft holds the draft's summary block (the conformance check holds it to that);
    a channel that shows no draft text (``none``, ``latent``) says False."""
    summary_only: bool = False
    """What is shown is read from the draft's summary block alone (not its reasoning, not its
    answer): a draft may stop as soon as ``</summary>`` closes (:data:`SUMMARY_CLOSE`) and the
    challenger reads the same text (``agon_env.serving.cascade``'s early stop)."""

    def __post_init__(self) -> None:
        if WORDINGS.get(self.words.__name__) is not self.words:
            raise ValueError(f"channel {self.name!r}: its words must be one of vocabulary.WORDINGS")


CHANNELS: dict[str, Channel] = {
    c.name: c
    for c in (
        Channel("summary", _summary, summary_only=True),
        Channel("redacted", _redacted),
        Channel("trace", _trace, words=trace_text, reasoning=True),
        Channel("none", _none, text=False, summary=False),
        Channel(
            "latent",
            _latent,
            words=latent_text,
            text=False,
            summary=False,
            cache=True,
            backends=("hf",),
            refusal=VLLM_REFUSAL,
        ),
    )
}
"""The exchange channels by name (the env keyword ``exchange``, ``agon train --exchange``)."""
DEFAULT = "summary"
CACHE_CHANNEL = next(c.name for c in CHANNELS.values() if c.cache)
"""The channel that hands the draft over as its KV cache (the latent cascade's)."""
