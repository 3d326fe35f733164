"""A Gymnasium text space that really contains LaTeX, code and any Unicode.

``gymnasium.spaces.Text`` checks membership against an explicit character set (its
default is alphanumeric, so ``"What is 17 + 25?"`` is outside it) and stores that set
in memory, which rules out all of Unicode. :class:`UnicodeText` keeps ``Text``'s
interface but defines membership as "any ``str`` of allowed length that is valid
Unicode" (no lone surrogates, which cannot be encoded or tokenised).

Membership is what the env really takes: it refuses an action outside its action space
with the reason (:meth:`UnicodeText.why_not`) rather than decoding bytes or cutting text,
and ``gymnasium.spaces.utils.flatten`` gives each character's code point (``Text``'s own
flattening indexes a 62-character alphabet and fails on the first space).

``sample()`` draws from a fuzzing alphabet -- ASCII, LaTeX and math symbols, CJK, emoji,
and whole ``<summary>``/``<answer>`` tags -- and favours short strings, so that
PettingZoo's ``api_test`` exercises the parser with malformed completions in bounded
time.
"""

from __future__ import annotations

import numpy as np
from gymnasium.spaces import Box, Text
from gymnasium.spaces.utils import flatten, flatten_space, unflatten

_FUZZ_PIECES: tuple[str, ...] = (
    *[chr(c) for c in range(32, 127)],
    "\n",
    "\t",
    *"αβγπΣ∫√≤≥≠×÷∞∈→ℝ½²³",
    *"数学题答案",
    "😀",
    "𝑥",
    "\\frac{1}{2}",
    "\\boxed{",
    "<summary>",
    "</summary>",
    "<answer>",
    "</answer>",
    "```python\n",
)
_SAMPLE_MAX_PIECES = 256


class UnicodeText(Text):
    """Strings of ``min_length``..``max_length`` characters, any valid Unicode."""

    def __init__(
        self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None
    ):
        super().__init__(max_length=max_length, min_length=min_length, seed=seed)

    def contains(self, x: object) -> bool:
        return self.why_not(x) is None

    def why_not(self, x: object) -> str | None:
        """Why ``x`` is not in the space, in a few words; ``None`` when it is."""
        if not isinstance(x, str):
            return f"{type(x).__name__}, not str"
        if not self.min_length <= len(x) <= self.max_length:
            return f"{len(x)} characters, outside {self.min_length}..{self.max_length}"
        try:
            x.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"not valid Unicode ({exc.reason} at {exc.start})"
        return None

    def sample(self, mask: object = None, probability: object = None) -> str:
        if mask is not None or probability is not None:
            raise NotImplementedError("UnicodeText.sample does not support masks")
        n = int(self.np_random.integers(0, _SAMPLE_MAX_PIECES + 1))
        picks = self.np_random.integers(0, len(_FUZZ_PIECES), size=n)
        text = "".join(_FUZZ_PIECES[i] for i in picks)
        text = text[: self.max_length]
        if len(text) < self.min_length:
            text += "x" * (self.min_length - len(text))
        return text

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (
            other.min_length,
            other.max_length,
        )


PAD = 0x110000
"""Flattened padding: one past the largest code point, as ``Text`` pads with its alphabet's size."""


@flatten_space.register(UnicodeText)
def _flatten_space(space: UnicodeText) -> Box:
    return Box(low=0, high=PAD, shape=(space.max_length,), dtype=np.int32)


@flatten.register(UnicodeText)
def _flatten(space: UnicodeText, x: str) -> np.ndarray:
    out = np.full(space.max_length, PAD, dtype=np.int32)
    out[: len(x)] = [ord(c) for c in x]
    return out


@unflatten.register(UnicodeText)
def _unflatten(space: UnicodeText, x: np.ndarray) -> str:
    return "".join(chr(int(c)) for c in x if c != PAD)
