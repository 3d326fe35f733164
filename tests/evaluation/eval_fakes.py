"""A deterministic fake agent for evaluator tests: it knows which arith problems it solves."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agon_env.agents.protocol import Completion
from agon_env.envs.tasks.arith import evaluate


def gold(problem: str) -> int:
    return evaluate(problem.removeprefix("What is ").removesuffix("?"))


def hashed(name: str, mod: int) -> Callable[[str], bool]:
    """Solves a fixed, name-dependent subset of problems (about 1/mod of them wrong)."""
    return lambda problem: zlib.crc32(f"{name}/{problem}".encode()) % mod != 0


class FakeAgent:
    """Right on ``solves(problem)``; as a reader of a draft, also right when ``fixes``.

    Its completions carry token ids (one per word) so trace lengths are in tokens.
    """

    def __init__(
        self, name: str, solves: Callable[[str], bool], fixes: bool = False, tokens: int = 5
    ) -> None:
        self.name, self.solves, self.fixes, self.tokens = name, solves, fixes, tokens
        self.calls: list[int] = []

    def act(
        self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        self.calls.append(len(observations))
        out = []
        for obs in observations:
            problem = obs["problem"]
            reading = int(obs["role"]) == 1 and bool(obs["draft"])
            right = self.solves(problem) or (reading and self.fixes)
            ans = gold(problem) + (0 if right else 1)
            n = self.tokens * (2 if reading else 1)
            text = f"work <summary>I computed {ans}.</summary><answer>{ans}</answer>"
            out.append(Completion(text=text, completion_ids=[1] * n, agent=self.name))
        return out
