"""``agon/arith-v0``: procedural multi-step integer arithmetic, seeded and fully offline.

The embedded default task. Problem ``i`` of a task is generated from
``(seed, split, difficulty, i)`` alone, so any index is reproducible without storing
data. The splits partition the *expression space*: an expression belongs to the split
:func:`~agon_env.envs.tasks.base.content_split` gives its prompt (20 % test, 10 %
validation, 70 % train), and a split's generator draws until it lands in its own part,
so no prompt occurs in two splits. The small levels repeat problems within a split;
distinct problems per split (``python -m agon_env.envs.tasks.arith`` recounts them):

=====  ======  ==========  ======
level  train   validation  test
=====  ======  ==========  ======
1      73      10          17
2      211     30          59
2.5    1886    284         530
3      6286    904         1810
4, 5   > 10⁵   > 10⁴       > 10⁴
=====  ======  ==========  ======

``agon eval`` samples *distinct* test and validation problems, so at level 2 it can
report on at most 59 test problems.

The split holds apart *expressions*, not their numbers: a held-out ``3 + 4`` may have its
training twin ``4 + 3`` (the same numbers and operators in another order, same value;
:func:`rearranged`). Validation / test expressions with one: level 1: 6 / 12, level 2: 15 / 25,
level 2.5: 0 / 0 (``b op a`` is not a 2.5 shape), level 3: 782 / 1540 (the same command). This
is not the trained-function problem pyfunc had (every split trains every operator, so no
held-out arith skill exists to leak), and the split is left as it is: a held-out arith score
measures new expressions of trained kinds, some of them trained answers under another order.

Difficulty levels (calibrated on SmolLM2-135M-Instruct with two worked few-shot turns,
T=0.7: single-digit sums 9/16, single-digit ``+``/``×`` 13/16, two-digit sums 1/16):

=====  ===========================================  ===============================
level  shape                                        example
=====  ===========================================  ===============================
1      ``a + b``, single digits                     ``What is 3 + 5?``
2      ``a op b``, single digits, ``+ − ×``         ``What is 7 × 6?``
2.5    ``a op b``, ``a`` two digits, ``b`` one      ``What is 48 × 5?``
3      ``a op b op c``, single digits               ``What is 4 + 3 × 2?``
4      ``a op b op c``, up to two digits            ``What is 12 × 3 − 17?``
5      four terms, up to two digits, parentheses    ``What is (14 + 9) × 3 − 25?``
=====  ===========================================  ===============================

Level 2.5 is the hard regime at CPU scale: SmolLM2-135M's pass@1 after the worked examples
(``base-few-shot``; the examples of 35d8054, which stated results in their summaries) on the
validation split is 25 % (25/100; the first replication's calibration, recorded in
``docs/results/replication_cpu.json``), and its wrong drafts are arithmetic slips a reader
who re-derives can catch (``93 × 5`` → 455, ``18 + 2`` → 30). Candidates measured on 80
validation problems each (2026-12-01, same sampling) before it was chosen: this shape 26 %
(``+`` 9/26, ``−`` 5/30, ``×`` 7/24), level 3 12.5 %, ``a ± b ± c`` with single digits 5 %,
two-digit ``±`` two-digit 11 %; level 2 was at 65 % (2026-11-29). Levels 3–5 are harder still; ``×``
binds tighter than ``+``/``−`` as usual and results may be negative. The calibration
command, per level::

    agon eval --env agon/arith-v0 --env-kwarg difficulty=LEVEL --split validation \
      --methods base-few-shot --problems 100 --val-problems 0 --temperature 0.7 --max-new-tokens 80

The level is 2.5, not a renumbered 3, so that every recorded result naming levels 3–5
keeps its meaning.

Problem 0 of ``ArithTask()`` (difficulty 2, ``agon/arith-v0``'s default) as the model sees it::

    What is 3 − 4?

Gold answer: ``"-1"`` (compared with :func:`~agon_env.envs.tasks.verify.answers_match`).
"""

from __future__ import annotations

import random

from agon_env.envs.tasks.base import SPLITS, Problem, content_split
from agon_env.envs.tasks.verify import answers_match
from agon_env.seeding import derive_seed

LEVELS = (1, 2, 2.5, 3, 4, 5)
"""The difficulty levels, easiest first."""

_OPS = {"+": lambda a, b: a + b, "−": lambda a, b: a - b, "×": lambda a, b: a * b}
_PY = {"+": "+", "−": "-", "×": "*"}


def level(difficulty: float) -> int | float:
    """``difficulty`` as a member of :data:`LEVELS` (``3.0`` -> ``3``), or ``ValueError``."""
    if isinstance(difficulty, bool) or not isinstance(difficulty, (int, float)) or difficulty not in LEVELS:
        raise ValueError(f"difficulty must be one of {', '.join(map(str, LEVELS))}; got {difficulty!r}")
    return int(difficulty) if float(difficulty).is_integer() else float(difficulty)


def _expression(rng: random.Random, difficulty: float) -> str:
    if difficulty == 1:
        return f"{rng.randint(0, 9)} + {rng.randint(0, 9)}"
    if difficulty == 2:
        return f"{rng.randint(0, 9)} {rng.choice('+−×')} {rng.randint(0, 9)}"
    if difficulty == 2.5:
        return f"{rng.randint(10, 99)} {rng.choice('+−×')} {rng.randint(0, 9)}"
    hi = 9 if difficulty == 3 else 30
    terms = 3 if difficulty <= 4 else 4
    nums = [rng.randint(1 if difficulty > 3 else 0, hi) for _ in range(terms)]
    ops = [rng.choice("+−×") for _ in range(terms - 1)]
    parts = [str(nums[0])]
    for op, n in zip(ops, nums[1:], strict=True):
        parts += [op, str(n)]
    if difficulty == 5:
        # Parenthesise the first pair so order of operations matters beyond precedence.
        parts[0], parts[2] = "(" + parts[0], parts[2] + ")"
    return " ".join(parts)


def _prompt(expression: str) -> str:
    return f"What is {expression}?"


def _expressions(difficulty: float) -> list[str]:
    """Every expression of a level (levels 1-3: levels 4-5 have too many to enumerate)."""
    if level(difficulty) > 3:
        raise ValueError("levels 4-5 have too many expressions to enumerate; count a sample instead")
    digits, ops = range(10), "+−×"
    if difficulty == 1:
        return [f"{a} + {b}" for a in digits for b in digits]
    if difficulty == 2:
        return [f"{a} {o} {b}" for a in digits for o in ops for b in digits]
    if difficulty == 2.5:
        return [f"{a} {o} {b}" for a in range(10, 100) for o in ops for b in digits]
    return [f"{a} {o} {b} {p} {c}" for a in digits for o in ops for b in digits for p in ops for c in digits]


def distinct_problems(difficulty: float, split: str) -> int:
    """How many distinct prompts ``split`` of a level holds (exact for levels 1-3)."""
    return sum(content_split(_prompt(e)) == split for e in _expressions(difficulty))


def rearranged(difficulty: float, split: str) -> int:
    """How many of ``split``'s distinct expressions (levels 1-3) have a *training* twin: the same
    numbers and operators in another order with the same value (``3 + 4`` held out, ``4 + 3``
    trained). Not a trained function -- every split has every operator -- but a held-out prompt
    whose answer was trained under another arrangement; the split keeps them (docs/envs.md)."""

    def key(expr: str) -> tuple[tuple[str, ...], tuple[str, ...], int]:
        parts = expr.split()
        return tuple(sorted(parts[::2])), tuple(sorted(parts[1::2])), evaluate(expr)

    trained = {key(e) for e in _expressions(difficulty) if content_split(_prompt(e)) == "train"}
    return sum(
        content_split(_prompt(e)) == split and key(e) in trained and split != "train"
        for e in _expressions(difficulty)
    )


def evaluate(expression: str) -> int:
    """Exact value of an expression produced by this module (``−``/``×`` as Unicode)."""
    py = "".join(_PY.get(ch, ch) for ch in expression)
    if not set(py) <= set("0123456789+-*() "):
        raise ValueError(f"not an arith-v0 expression: {expression!r}")
    return int(eval(py, {"__builtins__": {}}, {}))  # safe: the charset check above admits only arithmetic


class ArithTask:
    """Procedural arithmetic problems at one difficulty level."""

    prompt_family = "arithmetic"
    """Worked examples and instructions the agents use (``agon_env.agents.prompt_families``)."""

    def __init__(
        self,
        difficulty: float = 2,
        size: int = 10_000,
        seed: int = 0,
        split: str = "train",
        name: str | None = None,
    ) -> None:
        difficulty = level(difficulty)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        self.difficulty, self.size, self.seed, self.split = difficulty, size, seed, split
        self.name = name or f"arith-d{difficulty}"

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Problem:
        if not 0 <= index < self.size:
            raise IndexError(index)
        # Integer levels keep the seed keys they always had; 2.5 is keyed by its text.
        key = self.difficulty if isinstance(self.difficulty, int) else str(self.difficulty)
        rng = random.Random(derive_seed(self.seed, "arith", self.split, key, index))
        expr = _expression(rng, self.difficulty)
        while content_split(_prompt(expr)) != self.split:  # rejection: stay in this split's part
            expr = _expression(rng, self.difficulty)
        return Problem(
            id=f"{self.split}-{index}",
            prompt=_prompt(expr),
            answer=str(evaluate(expr)),
            meta={"difficulty": self.difficulty, "expression": expr},
        )

    def score(self, problem: Problem, answer: str) -> bool:
        return answers_match(problem.answer, answer)


if __name__ == "__main__":
    print("level, distinct problems per split, then held-out ones with a rearranged training twin")
    for lv in (1, 2, 2.5, 3):
        print(lv, *(distinct_problems(lv, s) for s in SPLITS), "|", *(rearranged(lv, s) for s in SPLITS[1:]))
