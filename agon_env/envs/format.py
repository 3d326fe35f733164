"""Parsing the paper's completion format: reasoning, then ``<summary>`` and ``<answer>``.

Everything here is a pure function of the completion text. The parser never raises:
malformed text (missing, unbalanced, nested or repeated tags) parses with
``format_ok == False`` and whatever could still be recovered, so the env can score
anything a policy writes.

Well-formed means: exactly one ``<summary>…</summary>`` followed by exactly one
``<answer>…</answer>``, neither nested in the other, neither empty, and nothing but
whitespace after ``</answer>``.

Thinking models (Qwen3 with ``enable_thinking``, R1-style) reason inside
``<think>…</think>`` first. Those thoughts are parsed as thoughts only: tags written while
thinking are ignored, ``<summary>``/``<answer>`` count only after the last ``</think>``, and
a completion cut off while still thinking has no answer. The thoughts count in the trace
length (they are tokens the model generated) but are never shown to the rival.

The tags and blocks are located in :mod:`agon_env.blocks` (the latent channel, which imports no
env, reads drafts by the same rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agon_env.blocks import TAG, blocks, split_thoughts

__all__ = ["Parsed", "parse_completion", "split_thoughts", "strip_answer_blocks"]


@dataclass(frozen=True)
class Parsed:
    """What the env reads out of one completion."""

    reasoning: str
    """Text before the first tag (after any thoughts): never shown to the rival."""
    summary: str | None
    """Content of the (last complete) summary block, stripped; ``None`` when absent."""
    answer: str | None
    """Content of the last complete answer block, stripped; ``None`` when absent."""
    format_ok: bool
    thoughts: str | None = None
    """Content of the ``<think>`` block(s), or ``None`` when the completion did not think."""


def parse_completion(text: str) -> Parsed:
    """Split a completion into thoughts, reasoning, summary and answer, and judge its format."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    thoughts, text, closed = split_thoughts(text)
    if not closed:  # cut off while thinking: nothing after the thoughts to score
        return Parsed(reasoning="", summary=None, answer=None, format_ok=False, thoughts=thoughts)
    found, balanced = blocks(text)
    summaries, answers = found["summary"], found["answer"]
    summary = text[summaries[-1][1] : summaries[-1][2]].strip() if summaries else None
    answer = text[answers[-1][1] : answers[-1][2]].strip() if answers else None
    first = TAG.search(text)
    reasoning = text[: first.start()] if first else text
    format_ok = (
        balanced
        and len(summaries) == 1
        and len(answers) == 1
        and summaries[0][3] <= answers[0][0]
        and bool(summary)
        and bool(answer)
        and not text[answers[0][3] :].strip()
    )
    return Parsed(reasoning=reasoning, summary=summary, answer=answer, format_ok=format_ok, thoughts=thoughts)


def strip_answer_blocks(text: str) -> str:
    """Remove every ``<answer>`` block (and stray answer tags) from ``text``.

    Summaries are user text too: a policy can paste its answer tags inside a summary,
    and the rival must still never see an answer block.
    """
    text = re.sub(r"<answer>.*?</answer>", "", text, flags=re.IGNORECASE | re.DOTALL)
    return re.sub(r"</?answer>", "", text, flags=re.IGNORECASE)
