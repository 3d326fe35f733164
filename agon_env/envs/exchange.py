"""What passes from drafter to challenger, worded once: the shown draft and the user turn.

The challenger never reads the draft's reasoning or its ``<answer>`` block. It is shown
the draft's summary with every answer block removed (:func:`shown_draft`), capped in
length, or :data:`NO_SUMMARY` when the draft gave none -- and it still plays the
challenger then. :func:`challenger_text` words its user turn; the env puts it in the
observation's ``text`` and an LLM agent sends that verbatim (its worked examples are
rendered through the same function). It is defined in :mod:`agon_env.vocabulary`, which
the agents import without importing the env, and is the one wording of that turn.

Removing the answer block is the paper's rule. A summary may still state the result in
words ("Six sevens are 42."); the env measures how often (``summary_leak``) and can blank
it (``redact_answer=True``, beyond the paper), see
:func:`agon_env.envs.tasks.verify.mentions_answer`.
"""

from __future__ import annotations

from agon_env.envs.format import strip_answer_blocks
from agon_env.vocabulary import challenger_text

__all__ = ["MAX_SUMMARY_CHARS", "NO_SUMMARY", "challenger_text", "shown_draft"]

MAX_SUMMARY_CHARS = 4000
"""Summaries are cut here so a rambling draft cannot flood the rival's context."""
NO_SUMMARY = "(the draft gave no usable summary)"
"""Shown in place of the summary when the draft has none (truncated, malformed or empty)."""


def shown_draft(summary: str | None) -> str:
    """What the challenger is shown of a draft: its summary without answer blocks, capped."""
    return strip_answer_blocks(summary or "").strip()[:MAX_SUMMARY_CHARS] or NO_SUMMARY
