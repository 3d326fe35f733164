"""Tasks where checking an answer is easier than finding it: where a rival *can* help.

A reader gains on a cascade only where it checks better than the drafter solves (the
generation–verification gap, :mod:`agon_env.evaluation.probe`). Arithmetic has almost
none at small scale: re-deriving ``48 × 5`` is exactly as hard as deriving it. These
three procedural tasks are built so that a proposed answer is verified by one easy
computation while finding it takes a search or an inverse:

============  ===========================================================  ====================
kind          example                                                      checking an answer
============  ===========================================================  ====================
countdown     Use each of 3 and 7 exactly once with +, − or × to make 21.  evaluate it once
divides       Which one of 4, 7, 10, 11 divides 63 exactly?                one division
linear        Find x such that 7x + 3 = 59.                                 substitute x
============  ===========================================================  ====================

``agon/countdown-v0`` takes ``numbers`` (2 or 3) and ``divides`` takes ``options`` (2–4);
all three take ``largest`` (the largest operand, :class:`Sizes`), ``size``, ``seed`` and
``split``, and name their own prompt family (worked examples of the same kind:
:mod:`agon_env.agents.checkable_prompts`). Like ``agon/arith-v0`` a problem is generated
from ``(seed, split, index)`` alone and the splits partition the prompt space by
:func:`~agon_env.envs.tasks.base.content_split`, so train, validation and test share no
prompt. Countdown scores any expression that uses the given numbers once each and hits
the target, not only the generator's (its gold answer is one solution, for reference).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from agon_env.envs.tasks.arith import evaluate
from agon_env.envs.tasks.base import SPLITS, Problem, content_split
from agon_env.envs.tasks.verify import answers_match, unbox
from agon_env.json_value import JSONRecord
from agon_env.seeding import derive_seed

Generated = tuple[str, str, JSONRecord]
"""``(prompt, gold answer, meta)`` of one problem."""

_OPS = "+−×"
_ASCII = str.maketrans({"-": "−", "*": "×", "x": "×", "X": "×", "·": "×", "\u2212": "−"})


@dataclass(frozen=True)
class Sizes:
    """How big one kind's problems are (the probe sizes them so the base solves 20–60 %)."""

    numbers: int = 2
    """Countdown: how many numbers to combine (2 or 3)."""
    largest: int = 12
    """The largest operand: countdown's numbers, divides' divisor and cofactor, linear's x (its
    coefficient stays ≤ 9 and its constant ≤ 2.5 × this)."""
    options: int = 4
    """Divides: how many options are shown (exactly one divides)."""


DEFAULT_LARGEST = {"countdown": {2: 20, 3: 9}, "divides": {2: 12}, "linear": {2: 12}}
"""``largest`` when not given, by kind and (countdown) ``numbers``: the sizes first registered."""


def _countdown(rng: random.Random, size: Sizes) -> Generated:
    numbers, hi = size.numbers, size.largest
    while True:
        nums = [rng.randint(2, hi) for _ in range(numbers)]
        ops = [rng.choice(_OPS) for _ in range(numbers - 1)]
        expr = f"{nums[0]} {ops[0]} {nums[1]}"
        if numbers == 3:
            expr = f"({expr}) {ops[1]} {nums[2]}"
        target = evaluate(expr)
        if target > 0:  # a positive target reads as a puzzle, not a trick
            break
    shown = sorted(nums)
    listed = " and ".join(map(str, shown)) if numbers == 2 else f"{shown[0]}, {shown[1]} and {shown[2]}"
    prompt = (
        f"Use each of {listed} exactly once, with +, − or × (and parentheses), to make {target}. "
        "Answer with the expression."
    )
    return prompt, expr, {"numbers": shown, "target": target}


def _divides(rng: random.Random, size: Sizes) -> Generated:
    while True:  # small sizes: redraw until enough options do not divide
        d, m = rng.randint(3, size.largest), rng.randint(2, size.largest)
        x = d * m
        others = [n for n in range(2, size.largest + 2) if x % n and n != d]
        if len(others) >= size.options - 1:
            break
    options = sorted([d, *rng.sample(others, size.options - 1)])
    listed = ", ".join(map(str, options[:-1])) + f" and {options[-1]}"
    prompt = f"Which one of {listed} divides {x} exactly? Answer with that number."
    return prompt, str(d), {"options": options, "number": x}


def _linear(rng: random.Random, size: Sizes) -> Generated:
    hi = size.largest
    a, x, b = rng.randint(2, min(9, hi)), rng.randint(1, hi), rng.randint(1, max(2, 5 * hi // 2))
    sign = rng.choice("+−") if a * x > b else "+"  # c stays positive: "= −4" is a trick, not a check
    c = a * x + b if sign == "+" else a * x - b
    return f"Find x such that {a}x {sign} {b} = {c}.", str(x), {"a": a, "b": b, "sign": sign, "c": c}


_NUMBER = re.compile(r"\d+")


_LATEX = (("\\times", "×"), ("\\cdot", "×"), ("\\left", ""), ("\\right", ""), ("\\,", ""), ("$", ""))


def _check_countdown(problem: Problem, answer: str) -> bool:
    expr = unbox(answer.strip())  # the math family asks for "a number or a LaTeX expression"
    for latex, plain in _LATEX:
        expr = expr.replace(latex, plain)
    expr = expr.strip().rstrip(".").translate(_ASCII)
    expr = expr.split("=")[0].strip()  # "3 × 7 = 21" states the expression first
    if not expr or not set(expr) <= set("0123456789+−×() "):
        return False
    if Counter(map(int, _NUMBER.findall(expr))) != Counter(problem.meta["numbers"]):
        return False
    try:
        return evaluate(expr) == problem.meta["target"]
    except (SyntaxError, ValueError, ZeroDivisionError):
        return False


def _check_gold(problem: Problem, answer: str) -> bool:
    return answers_match(problem.answer, answer)


KINDS: dict[str, tuple[Callable[[random.Random, Sizes], Generated], Callable[[Problem, str], bool]]] = {
    "countdown": (_countdown, _check_countdown),
    "divides": (_divides, _check_gold),
    "linear": (_linear, _check_gold),
}
"""Each kind: its generator and its checker."""


class CheckableTask:
    """Procedural problems of one :data:`KINDS` entry, per split."""

    def __init__(
        self,
        kind: str,
        size: int = 10_000,
        seed: int = 0,
        split: str = "train",
        numbers: int = 2,
        largest: int | None = None,
        options: int = 4,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        if numbers not in (2, 3) or (numbers == 3 and kind != "countdown"):
            raise ValueError(f"numbers must be 2 (or 3 for countdown), got {numbers!r}")
        default = DEFAULT_LARGEST[kind][numbers]
        largest = default if largest is None else largest
        if not 4 <= largest <= 99:
            raise ValueError(f"largest must be in 4..99, got {largest!r}")
        if not 2 <= options <= 4:
            raise ValueError(f"options must be 2, 3 or 4, got {options!r}")
        self.kind, self.size, self.seed, self.split = kind, size, seed, split
        self.sizes = Sizes(numbers, largest, options)
        self.name = kind + (f"-{numbers}" if kind == "countdown" else "")
        self.name += (f"-largest{largest}" if largest != default else "") + (
            f"-options{options}" if options != 4 else ""
        )
        self.prompt_family = kind  # worked examples of its own kind (agon_env.agents.checkable_prompts)
        self._generate, self._check = KINDS[kind]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Problem:
        if not 0 <= index < self.size:
            raise IndexError(index)
        rng = random.Random(derive_seed(self.seed, self.kind, self.split, self.sizes.numbers, index))
        prompt, gold, meta = self._generate(rng, self.sizes)
        while content_split(prompt) != self.split:  # rejection: stay in this split's part
            prompt, gold, meta = self._generate(rng, self.sizes)
        return Problem(id=f"{self.split}-{index}", prompt=prompt, answer=gold, meta=meta)

    def score(self, problem: Problem, answer: str) -> bool:
        return self._check(problem, answer)


def countdown(
    size: int = 10_000, seed: int = 0, split: str = "train", numbers: int = 2, largest: int | None = None
) -> CheckableTask:
    """``agon/countdown-v0``."""
    return CheckableTask("countdown", size, seed, split, numbers, largest)


def divides(
    size: int = 10_000, seed: int = 0, split: str = "train", largest: int | None = None, options: int = 4
) -> CheckableTask:
    """``agon/divides-v0``."""
    return CheckableTask("divides", size, seed, split, largest=largest, options=options)


def linear(
    size: int = 10_000, seed: int = 0, split: str = "train", largest: int | None = None
) -> CheckableTask:
    """``agon/linear-v0``."""
    return CheckableTask("linear", size, seed, split, largest=largest)
