"""Model-free agents for tests and fuzzing; same protocol as :class:`LLMAgent`.

``ScriptedAgent`` answers from a function or a fixed list of strings. ``RandomAgent``
writes seeded junk that often looks almost right (missing, unbalanced, nested or
repeated tags, empty blocks, Unicode, LaTeX), to exercise the env's parser and rewards.
Neither carries token ids or log-probs. Neither samples from a model, so their completions
record no temperature unless one is given (``temperature=``: a stand-in for an agent that
samples at it, for tests of who samples how).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agon_env.agents.protocol import Completion

Observation = Mapping[str, Any]


class ScriptedAgent:
    """Completions from ``script``: a callable ``obs -> str`` or a sequence of strings.

    A sequence is consumed in order across calls and wraps around, so
    ``ScriptedAgent("a", ["x", "y"])`` answers x, y, x, ... over successive observations.
    """

    def __init__(
        self,
        name: str,
        script: Callable[[Observation], str] | Sequence[str] | str,
        temperature: float | None = None,
    ) -> None:
        if isinstance(script, str):
            script = [script]
        if not callable(script) and len(script) == 0:
            raise ValueError("a scripted agent needs at least one completion")
        self.name = name
        self.script = script
        self.temperature = temperature
        self.calls = 0
        """Observations answered so far (the position in a string script)."""

    def _next(self, obs: Observation) -> str:
        text = self.script(obs) if callable(self.script) else self.script[self.calls % len(self.script)]
        self.calls += 1
        return str(text)

    def act(
        self, observations: Sequence[Observation], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        return [
            Completion(
                text=self._next(o),
                agent=self.name,
                meta={"role": int(o.get("role", 0))},
                temperature=self.temperature,
            )
            for o in observations
        ]


_WORDS = ["the", "answer", "is", "so", "check", "draft", "wrong", "right", "then", "=", "+", "*", "7", "42"]
_ODD = ["∑", "π", "\\frac{1}{2}", "\\boxed{3}", "日本", "🙂", "\x00", "\n", "\t", "<", ">", "</", "<<>>"]


class RandomAgent:
    """Seeded random completions, a good share of them with malformed tags."""

    def __init__(
        self, name: str, seed: int = 0, max_words: int = 40, temperature: float | None = None
    ) -> None:
        self.name = name
        self.temperature = temperature
        self.rng = random.Random(seed)
        self.max_words = max_words

    def _words(self, lo: int = 0) -> str:
        r = self.rng
        n = r.randint(lo, self.max_words)
        return " ".join(
            r.choice(_WORDS + _ODD) if r.random() < 0.9 else str(r.randint(-999, 999)) for _ in range(n)
        )

    def _completion(self) -> str:
        r = self.rng
        summary = f"<summary>{self._words(1)}</summary>"
        answer = f"<answer>{r.choice([str(r.randint(-99, 999)), self._words(), ''])}</answer>"
        kind = r.randrange(9)
        if kind == 0:  # well formed
            return f"{self._words()}\n{summary}\n{answer}"
        if kind == 1:  # no tags at all
            return self._words()
        if kind == 2:  # unclosed answer
            return f"{self._words()} {summary} <answer>{self._words()}"
        if kind == 3:  # answer before summary
            return f"{answer} {summary}"
        if kind == 4:  # nested
            return f"<summary>{self._words()} {answer}</summary>"
        if kind == 5:  # repeated answers
            return f"{summary} {answer} {answer}"
        if kind == 6:  # stray closers and mixed case
            return f"</answer>{self._words()}<SUMMARY>x</Summary><Answer>1</ANSWER>"
        if kind == 7:  # empty
            return ""
        return f"{summary}\n{answer}\ntrailing {self._words()}"  # text after the answer

    def act(
        self, observations: Sequence[Observation], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        return [
            Completion(
                text=self._completion(),
                agent=self.name,
                meta={"role": int(o.get("role", 0))},
                temperature=self.temperature,
            )
            for o in observations
        ]
