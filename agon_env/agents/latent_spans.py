"""Which tokens of a draft the latent challenger is conditioned on, and the settings that say so.

Its settings are :class:`agon_env.options.LatentConfig` (at the floor, so a run's config holds
them without loading this layer).
A *span* is a half-open range ``[start, end)`` of the draft's completion tokens whose keys
and values (computed under the drafter's adapter, in the draft's own context) are placed
before the challenger's prompt (:mod:`agon_env.agents.latent`). Both spans end before the
draft's first ``<answer>`` tag: like every text channel, the latent one never hands over
the answer block.

==============  ===========================================================================
span            tokens
==============  ===========================================================================
``summary``     the ``<summary>…</summary>`` block (the last one, as the parser reads it):
                the latent counterpart of the paper's text ``summary`` channel (default)
``completion``  the whole completion up to its answer block: the latent counterpart of
                ``trace``
==============  ===========================================================================

Why ``summary`` is the default: it carries what the paper's text channel carries, so
``summary`` vs ``latent`` compares the medium (text vs cache) on the same content; it is the
shorter span, so its stored caches cost a fraction of the memory (SmolLM2-135M: 46 080 bytes
per token in fp32; 11 vs 20 MB a step at CPU scale); and, measured on one seed after issue
25's comparison (exploratory, docs/benchmarks.md), a challenger conditioned on the whole
completion's cache almost stopped writing the answer format (1 of 120 cascade answers in
format against 107), its cascade scoring 5 % against 25 %. A draft without a summary gives an
empty span: the challenger then reads no cache at all, as the text channel shows
``NO_SUMMARY``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

_SUMMARY = re.compile(r"<summary>.*?</summary>", re.IGNORECASE | re.DOTALL)
_ANSWER = re.compile(r"<answer>", re.IGNORECASE)


def _summary_chars(text: str) -> tuple[int, int]:
    blocks = list(_SUMMARY.finditer(text))
    return (blocks[-1].start(), blocks[-1].end()) if blocks else (0, 0)


def _completion_chars(text: str) -> tuple[int, int]:
    return 0, len(text)


SPANS: dict[str, Callable[[str], tuple[int, int]]] = {
    "summary": _summary_chars,
    "completion": _completion_chars,
}
"""Span name -> ``completion text -> [start, end)`` in characters (before the answer cut)."""


def _tokens_before(tokenizer: Any, ids: Sequence[int], char: int) -> int:
    """How many leading tokens decode to at most ``char`` characters (binary search: a
    decoded prefix only grows as tokens are added)."""
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenizer.decode(list(ids[:mid]), skip_special_tokens=False)) <= char:
            lo = mid
        else:
            hi = mid - 1
    return lo


def span_tokens(tokenizer: Any, completion_ids: Sequence[int], span: str, max_tokens: int) -> tuple[int, int]:
    """``[start, end)`` over ``completion_ids`` of ``span``, cut before the first ``<answer>``
    tag and to its last ``max_tokens`` tokens; ``(n, n)`` when it is empty."""
    if span not in SPANS:
        raise ValueError(f"unknown latent span {span!r}; choose one of {list(SPANS)}")
    text = tokenizer.decode(list(completion_ids), skip_special_tokens=False)
    lo, hi = SPANS[span](text)
    answer = _ANSWER.search(text)
    if answer is not None:
        hi = min(hi, answer.start())
    if hi <= lo:
        return len(completion_ids), len(completion_ids)
    # Tokens that start at or after ``lo``, up to the last one that ends by ``hi``.
    start = _tokens_before(tokenizer, completion_ids, lo)
    end = max(start, _tokens_before(tokenizer, completion_ids, hi))
    if end == start and start < len(completion_ids):
        end = start + 1  # a span inside one token: that token
    return max(start, end - max_tokens), end
