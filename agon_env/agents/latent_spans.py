"""Which tokens of a draft the latent challenger is conditioned on, and the settings that say so.

Its settings are :class:`agon_env.options.LatentConfig` (at the floor, so a run's config holds
them without loading this layer).
A *span* is a half-open range ``[start, end)`` of the draft's completion tokens whose keys
and values (computed under the drafter's adapter) are placed before the challenger's prompt
(:mod:`agon_env.agents.latent`). Every span ends before the draft's first ``<answer>`` tag:
like every text channel, the latent one never hands over the answer block. A span is
encoded either *on its own* (a forward pass over its tokens alone, at positions ``0 … n − 1``:
its keys and values have attended to nothing but the span) or *in context* (a forward pass
over the draft's prompt and completion up to the span's end, keeping the span's rows: from
layer 1 up they have attended to the whole draft before them, its reasoning included).

======================  ===================================================================
span                    tokens, and what their cache can carry
======================  ===================================================================
``summary``             the ``<summary>…</summary>`` block (the last one, as the parser reads
                        it), encoded on its own: the cache carries the summary and nothing
                        else, the latent counterpart of the text ``summary`` channel (default)
``summary-in-context``  the same tokens encoded in context: few positions, but their states
                        carry the whole draft before them (the reasoning line that states the
                        result included): the span of issue 25's comparison
``completion``          the whole completion up to its answer block, in context: the latent
                        counterpart of ``trace``
======================  ===================================================================

Why ``summary`` is the default: only it carries what the paper's text channel carries, so
``summary`` vs ``latent`` compares the medium (text vs cache) on the same content (before
issue 41 the default was what is now ``summary-in-context``, which does not); it is a short
span, so its stored caches cost a fraction of the memory (SmolLM2-135M: 46 080 bytes per
token in fp32; 11 vs 20 MB a step at CPU scale); and, measured on one seed after issue 25's
comparison (exploratory, docs/benchmarks.md), a challenger conditioned on the whole
completion's cache almost stopped writing the answer format (1 of 120 cascade answers in
format against 107), its cascade scoring 5 % against 25 %.

Whether a draft gave the challenger anything is one rule for every channel
(:func:`agon_env.blocks.given`): a draft without a summary, or with an empty, whitespace-only
or answer-only one, or one written after its answer block, gives an empty span: the challenger
then reads no cache at all, as a text channel shows ``NO_SUMMARY`` for the same draft, and the
turn counts as ``draft_unusable``. A span covers its block with its tags (``<summary>`` …
``</summary>``); :func:`span_tokens` states how it meets token boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agon_env.agents.protocol import completion_text
from agon_env.blocks import given


@dataclass(frozen=True)
class Span:
    """Which characters of a draft's completion a span covers, and how they are encoded."""

    part: str
    """What of the draft it covers (:data:`agon_env.blocks.PARTS`): the characters
    :func:`agon_env.blocks.given` says its ``block`` is (tags included, cut before the first
    answer tag), by the rule every text channel reads too."""
    own_pass: bool
    """Encoded in a forward pass of its own (positions from 0), not in the draft's context."""


SPANS: dict[str, Span] = {
    "summary": Span("summary", own_pass=True),
    "summary-in-context": Span("summary", own_pass=False),
    "completion": Span("completion", own_pass=False),
}
"""The latent spans by name (``--latent.span``)."""


def span_of(name: str) -> Span:
    """The :data:`SPANS` row called ``name`` (one line naming the choices otherwise)."""
    if name not in SPANS:
        raise ValueError(f"unknown latent span {name!r}; choose one of {list(SPANS)}")
    return SPANS[name]


def _tokens_before(tokenizer: Any, ids: Sequence[int], char: int) -> int:
    """How many leading tokens decode to at most ``char`` characters (binary search: a
    decoded prefix only grows as tokens are added; a special token adds none)."""
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(completion_text(tokenizer, ids[:mid])) <= char:
            lo = mid
        else:
            hi = mid - 1
    return lo


def span_tokens(tokenizer: Any, completion_ids: Sequence[int], span: str, max_tokens: int) -> tuple[int, int]:
    """``[start, end)`` over ``completion_ids`` of ``span``, cut before the first answer tag and
    to its last ``max_tokens`` tokens; ``(n, n)`` when the draft gave the challenger nothing
    (:func:`agon_env.blocks.given`: the same drafts a text channel shows ``NO_SUMMARY`` for).

    Token boundaries: a token that straddles the block's first character is included (a merged
    ``.<summary>`` brings its ``.``), one that straddles its last character is not (the span
    ends with the last token wholly inside it), so the span never reaches into an answer tag."""
    text = completion_text(tokenizer, completion_ids)  # the text every text channel reads
    read = given(text, span_of(span).part)
    if not read.usable:
        return len(completion_ids), len(completion_ids)
    lo, hi = read.block
    # Tokens that start at or after ``lo``, up to the last one that ends by ``hi``.
    start = _tokens_before(tokenizer, completion_ids, lo)
    end = max(start, _tokens_before(tokenizer, completion_ids, hi))
    if end == start and start < len(completion_ids):
        end = start + 1  # a span inside one token: that token
    return max(start, end - max_tokens), end
