"""Streaming a batch's completions token by token: each row's new tokens in, its new text out.

A backend that streams (``generate(..., stream=emit)``) calls ``emit(row, text)`` with each row's
next piece of text while it decodes, ``row`` being the prompt's index in the call. The pieces of a
row join to exactly its completion's ``text`` (:func:`~agon_env.agents.protocol.completion_text`,
the one decoding rule), so a client that concatenates what it streamed holds what a call without
streaming returns. :class:`TextDeltas` is the one place that turns token ids into those pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agon_env.agents.protocol import completion_text

Emit = Callable[[int, str], None]
"""``(row, text)``: the next piece of row ``row``'s completion text."""

PARTIAL = "\ufffd"
"""What decoding shows for a character whose bytes are split across tokens not all generated yet."""


class TextDeltas:
    """Each row's growing token ids, decoded into the text not yet emitted.

    A row's whole text is decoded again at every step (a completion is at most a few hundred
    tokens; decoding a window instead differs at its edges for some tokenizers), and a piece is
    emitted only while the text extends what was sent: a trailing partial character, or a text that
    decoding rewrote behind what was sent, waits for the next token or for :meth:`finish`."""

    def __init__(self, tokenizer: Any, emit: Emit) -> None:
        self.tokenizer, self.emit = tokenizer, emit
        self.ids: dict[int, list[int]] = {}
        self.sent: dict[int, str] = {}

    def add(self, row: int, token_ids: Sequence[int]) -> None:
        """Row ``row`` generated ``token_ids`` (after those given before)."""
        ids = self.ids.setdefault(row, [])
        ids.extend(int(t) for t in token_ids)
        text = completion_text(self.tokenizer, ids)
        if not text.endswith(PARTIAL):
            self._send(row, text)

    def finish(self, row: int, text: str | None = None) -> None:
        """Row ``row`` ended with ``text`` (default: its tokens decoded): emit what is left of it."""
        if text is None:
            text = completion_text(self.tokenizer, self.ids.get(row, []))
        self._send(row, text)

    def _send(self, row: int, text: str) -> None:
        sent = self.sent.get(row, "")
        if len(text) > len(sent) and text.startswith(sent):
            self.sent[row] = text
            self.emit(row, text[len(sent) :])
