"""The completion format's blocks, located once, and what a challenger is given of a draft.

Two layers read a draft: the env (:mod:`agon_env.envs.format` parses it, the text exchange
channels show part of it) and the agents (the latent channel hands part of it over as its KV
cache, :mod:`agon_env.agents.latent_spans`). The agents import no env, so the tags, the blocks
and the one rule both read live here, in a module that imports nothing of the package.

**The rule** (:func:`given`): a challenger is given a *part* of the draft -- its summary
(the content of the last complete ``<summary>`` block, as the parser reads it, after any
thoughts) or its whole completion -- and only what of it comes *before the draft's first
answer tag*, so no channel ever hands over an answer block, whether as text or as a cache
whose states attended to it. When that, with whitespace and the format's tags taken away, is
empty, the draft gave the
challenger nothing: the text channels show ``NO_SUMMARY``, the latent channel reads no cache,
and the turn counts as ``draft_unusable`` in every channel alike. So an empty, whitespace-only
or answer-only summary, and a summary written after the answer block, are unusable
everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A bounded scan: a 1 MB completion is located in linear time with one regex pass.
TAG = re.compile(r"</?(summary|answer)>", re.IGNORECASE)
ANSWER_TAG = re.compile(r"</?answer>", re.IGNORECASE)
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

Block = tuple[int, int, int, int]
"""``(open_start, content_start, content_end, close_end)`` of one complete block."""


def split_thoughts(text: str) -> tuple[str | None, str, bool]:
    """``(thoughts, the rest, closed)``: a completion's thinking part and what follows it.

    Thinking is a ``<think>`` at the very start (after whitespace) or a ``</think>``
    anywhere (templates that open the block in the prompt). ``closed`` is False when the
    thoughts never ended: the completion was cut off while thinking. ``the rest`` is always a
    suffix of ``text``.
    """
    stripped = text.lstrip()
    opened = stripped[: len(THINK_OPEN)].lower() == THINK_OPEN
    end = text.lower().rfind(THINK_CLOSE)
    if end < 0:
        return (stripped[len(THINK_OPEN) :], "", False) if opened else (None, text, True)
    start = text.lower().find(THINK_OPEN)
    begin = start + len(THINK_OPEN) if 0 <= start < end else 0
    return text[begin:end].strip(), text[end + len(THINK_CLOSE) :], True


def blocks(text: str) -> tuple[dict[str, list[Block]], bool]:
    """Complete blocks per tag, and whether the tags balance.

    ``balanced`` is False for stray closers, unclosed or nested tags -- any of which breaks the
    format; a nested opener restarts the block.
    """
    found: dict[str, list[Block]] = {"summary": [], "answer": []}
    balanced = True
    open_tag: tuple[str, int, int] | None = None
    for m in TAG.finditer(text):
        name = m.group(1).lower()
        closing = m.group(0)[1] == "/"
        if not closing:
            if open_tag is not None:
                balanced = False  # nested or unclosed: restart the block at the newer opener
            open_tag = (name, m.start(), m.end())
        elif open_tag is not None and open_tag[0] == name:
            found[name].append((open_tag[1], open_tag[2], m.start(), m.end()))
            open_tag = None
        else:
            balanced = False
    if open_tag is not None:
        balanced = False
    return found, balanced


PARTS = ("summary", "completion")
"""What of a draft a channel gives: its summary block, or the whole completion (``trace``)."""


@dataclass(frozen=True)
class Given:
    """What a challenger is given of one draft, as ``[start, end)`` characters of its completion."""

    content: tuple[int, int]
    """The text given, whitespace stripped (empty, ``start == end``, when nothing is)."""
    block: tuple[int, int]
    """The same with its tags: from the summary's ``<summary>`` (or the completion's start) to
    its ``</summary>``, cut at the first answer tag. The latent channel's span covers these
    characters; it is empty whenever ``content`` is."""

    @property
    def usable(self) -> bool:
        """The draft gave the challenger something to read."""
        return self.content[1] > self.content[0]


def given(text: str, part: str = "summary") -> Given:
    """What a challenger is given of the draft completion ``text`` from ``part`` (:data:`PARTS`):
    the rule of this module's docstring, for every channel."""
    if part not in PARTS:
        raise ValueError(f"unknown draft part {part!r}; choose one of {list(PARTS)}")
    n = len(text)
    nothing = Given((n, n), (n, n))
    _, rest, closed = split_thoughts(text)
    if not closed:  # cut off while thinking: the draft wrote nothing after its thoughts
        return nothing
    offset = n - len(rest)
    answer = ANSWER_TAG.search(rest)
    cut = offset + (answer.start() if answer else len(rest))
    if part == "summary":
        summaries = blocks(rest)[0]["summary"]
        if not summaries:
            return nothing
        open_start, lo, hi, close_end = (offset + i for i in summaries[-1])
        outer = (open_start, min(close_end, cut))
    else:
        lo, hi = 0, n
        outer = (0, cut)
    hi = min(hi, cut)
    inner = text[lo:hi] if hi > lo else ""
    lo, hi = lo + len(inner) - len(inner.lstrip()), lo + len(inner.rstrip())
    if hi <= lo or not TAG.sub("", text[lo:hi]).strip():  # tags alone say nothing
        return nothing
    return Given((lo, hi), outer)
