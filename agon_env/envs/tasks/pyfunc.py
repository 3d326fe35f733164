"""``agon/pyfunc-v0``: generated one- and two-line Python functions, checked by asserts in the sandbox.

The code task a small model can solve some of: MBPP, HumanEval and CodeContests are out of
SmolLM2-135M's reach (0 of 40 drafts pass on each, docs/benchmarks.md), so code competition at
CPU scale had no reward to learn from. Each problem asks for one small function from a table of
specs (:data:`SPECS`), some with a parameter (``multiples of {k}``), and shows one example call::

    Write a function `largest_even(xs)` that returns the largest even number in the list xs, or
    None if it has none. For example, `largest_even([7, 4, 12, 3])` returns `12`.

The answer is scored like MBPP's (:func:`~agon_env.envs.tasks.code_checks.check_asserts`): the
program runs in the sandbox and ``tests`` hidden asserts call its function (the shown example is
the first of them). Expected values come from the spec's reference solution, run on the host
when the problem is generated (it is the project's own code, never the model's).

**Splits by function, not by prompt.** A function (a spec with its parameter) belongs to the
split :func:`~agon_env.envs.tasks.base.content_split` gives its statement, and a split only draws
functions of its own, so train, validation and test share no function -- not only no prompt (the
example inputs alone would make every prompt new).

**Difficulty knobs.** ``difficulty`` picks the specs' level: 1, a single expression over one
builtin (``s[::-1]``, ``min(xs)``, ``s * 3``); 2, a condition or a comprehension (``largest
even``, ``words longer than 3 letters``); 3, two steps (``second largest distinct``, ``rotate
left by 2``). ``tests`` is how many asserts must pass (more inputs: fewer lucky passes) and
``example=False`` hides the example call. Each level includes the levels below it. Level 1 (the
default) is where ``agon probe`` finds SmolLM2-135M in the 20–60 % band the issue asks for:
12/40 = 30 % [17, 47] on validation (docs/benchmarks.md, sized after seeing a first probe:
exploratory). Functions per level (train / validation / test; ``python -m
agon_env.envs.tasks.pyfunc`` recounts them): 1: 86 / 13 / 21, 2: 116 / 17 / 27, 3: 140 / 19 / 30.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from agon_env.envs.tasks.base import SPLITS, Problem, check_split, content_split
from agon_env.envs.tasks.code import CodeTask
from agon_env.envs.tasks.code_checks import CheckReport, check_asserts, strip_code_fence
from agon_env.sandbox import Limits
from agon_env.seeding import derive_seed

Args = tuple[Any, ...]
Inputs = Callable[[random.Random, Any], Args]

_WORDS = [
    "apple",
    "bird",
    "cat",
    "dog",
    "echo",
    "fish",
    "gate",
    "hill",
    "ink",
    "jam",
    "kite",
    "lamp",
    "moon",
    "nest",
    "oak",
    "pen",
    "quiz",
    "rain",
    "sun",
    "tree",
    "up",
    "van",
    "wind",
    "box",
    "yard",
    "zoo",
    "art",
    "bee",
    "cup",
    "day",
    "egg",
    "fog",
    "gum",
    "hat",
    "ice",
    "joy",
    "key",
    "leg",
    "map",
    "nut",
    "owl",
    "pie",
]
_PALINDROMES = ("level", "noon", "radar", "refer", "civic", "kayak", "stats", "madam")


def _ints(rng: random.Random, lo: int = -9, hi: int = 20, n: tuple[int, int] = (3, 7)) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(*n))]


def _sentence(rng: random.Random, n: tuple[int, int] = (2, 5)) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(*n)))


def _word(rng: random.Random) -> str:
    return rng.choice(_PALINDROMES) if rng.random() < 0.3 else rng.choice(_WORDS) + rng.choice(_WORDS)


def _maybe_sorted(rng: random.Random) -> list[int]:
    return sorted(_ints(rng)) if rng.random() < 0.4 else _ints(rng)


def _distinct(rng: random.Random) -> list[int]:
    while len(set(xs := _ints(rng, 0, 30))) < 2:
        pass
    return xs


@dataclass(frozen=True)
class Spec:
    """One kind of function: ``statement`` and ``code`` are formatted with ``k`` for each of ``ks``."""

    level: int
    name: str
    signature: str
    statement: str
    """What the function returns, after ``Write a function `name(signature)` that``."""
    code: str
    """The reference solution (``{k!r}`` is the parameter): the expected values' source."""
    inputs: Inputs
    ks: tuple[Any, ...] = (None,)


_XS: Inputs = lambda rng, k: (_ints(rng),)  # noqa: E731
_POS: Inputs = lambda rng, k: (_ints(rng, 0, 30),)  # noqa: E731
_S: Inputs = lambda rng, k: (_sentence(rng),)  # noqa: E731
_W: Inputs = lambda rng, k: (_word(rng),)  # noqa: E731
_N: Inputs = lambda rng, k: (rng.randint(0, 99),)  # noqa: E731

SPECS: tuple[Spec, ...] = (
    # level 1: one expression over one builtin or idiom
    Spec(1, "reverse_string", "s", "returns the string s reversed", "return s[::-1]", _W),
    Spec(
        1,
        "reverse_words",
        "s",
        "returns the words of s in reverse order, joined by single spaces",
        "return ' '.join(s.split()[::-1])",
        _S,
    ),
    Spec(1, "to_upper", "s", "returns the string s in upper case", "return s.upper()", _S),
    Spec(1, "smallest", "xs", "returns the smallest number in the non-empty list xs", "return min(xs)", _XS),
    Spec(1, "first_word", "s", "returns the first word of the string s", "return s.split()[0]", _S),
    Spec(1, "last_char", "s", "returns the last character of the non-empty string s", "return s[-1]", _W),
    Spec(
        1,
        "is_palindrome",
        "s",
        "returns True when the string s reads the same backwards",
        "return s == s[::-1]",
        _W,
    ),
    Spec(1, "square", "n", "returns the square of the integer n", "return n * n", _N),
    Spec(1, "count_words", "s", "returns how many words the string s has", "return len(s.split())", _S),
    Spec(1, "is_odd", "n", "returns True when the integer n is odd", "return n % 2 == 1", _N),
    Spec(
        1,
        "double_all",
        "xs",
        "returns a list of every number in xs doubled",
        "return [x * 2 for x in xs]",
        _XS,
    ),
    Spec(1, "count_items", "xs", "returns how many elements the list xs has", "return len(xs)", _XS),
    Spec(
        1,
        "abs_diff",
        "a, b",
        "returns the absolute difference of the integers a and b",
        "return abs(a - b)",
        lambda rng, k: (rng.randint(-20, 20), rng.randint(-20, 20)),
    ),
    Spec(
        1,
        "repeat",
        "s",
        "returns the string s repeated {k} times",
        "return s * {k!r}",
        lambda rng, k: (rng.choice(_WORDS),),
        (2, 3, 4, 5, 6),
    ),
    Spec(1, "add_k", "n", "returns n plus {k}", "return n + {k!r}", _N, tuple(range(1, 21))),
    Spec(1, "minus_k", "n", "returns n minus {k}", "return n - {k!r}", _N, tuple(range(1, 21))),
    Spec(1, "times_k", "n", "returns n multiplied by {k}", "return n * {k!r}", _N, tuple(range(2, 13))),
    Spec(
        1,
        "is_multiple",
        "n",
        "returns True when the integer n is a multiple of {k}",
        "return n % {k!r} == 0",
        _N,
        tuple(range(3, 10)),
    ),
    Spec(
        1,
        "to_lower",
        "s",
        "returns the string s in lower case",
        "return s.lower()",
        lambda rng, k: (_sentence(rng).title(),),
    ),
    Spec(
        1, "no_spaces", "s", "returns the string s with its spaces removed", "return s.replace(' ', '')", _S
    ),
    Spec(
        1,
        "has_letter",
        "s",
        'returns True when the letter "{k}" occurs in the string s',
        "return {k!r} in s",
        _S,
        tuple("abdegiklmnoprstuwy"),
    ),
    Spec(
        1,
        "scale",
        "xs",
        "returns a list of every number in xs multiplied by {k}",
        "return [x * {k!r} for x in xs]",
        _XS,
        (3, 4, 5, 6, 7, 8, 9),
    ),
    Spec(
        1,
        "above",
        "n",
        "returns True when the integer n is greater than {k}",
        "return n > {k!r}",
        _N,
        (5, 10, 20, 50, 75),
    ),
    Spec(
        1,
        "last_k",
        "xs",
        "returns the last {k} elements of the list xs",
        "return xs[-{k!r}:]",
        _XS,
        (2, 3, 4),
    ),
    Spec(
        1,
        "first_k",
        "s",
        "returns the first {k} characters of the string s",
        "return s[:{k!r}]",
        _S,
        (2, 3, 4, 5),
    ),
    Spec(
        1,
        "ends_with",
        "s",
        'returns True when the string s ends with the letter "{k}"',
        "return s.endswith({k!r})",
        lambda rng, k: (_word(rng) + (k if rng.random() < 0.5 else ""),),
        tuple("aeknt"),
    ),
    # level 2: a condition or a comprehension
    Spec(
        2,
        "largest_even",
        "xs",
        "returns the largest even number in the list xs, or None if it has none",
        "evens = [x for x in xs if x % 2 == 0]\n    return max(evens) if evens else None",
        _XS,
    ),
    Spec(
        2,
        "sum_evens",
        "xs",
        "returns the sum of the even numbers in the list xs",
        "return sum(x for x in xs if x % 2 == 0)",
        _XS,
    ),
    Spec(
        2,
        "count_evens",
        "xs",
        "returns how many numbers in the list xs are even",
        "return sum(1 for x in xs if x % 2 == 0)",
        _XS,
    ),
    Spec(
        2,
        "count_greater",
        "xs",
        "returns how many numbers in the list xs are greater than {k}",
        "return sum(1 for x in xs if x > {k!r})",
        _XS,
        (0, 3, 5, 10, 15),
    ),
    Spec(
        2,
        "multiples",
        "xs",
        "returns the numbers in the list xs that are multiples of {k}, in order",
        "return [x for x in xs if x % {k!r} == 0]",
        _POS,
        (2, 3, 4, 5, 6, 7),
    ),
    Spec(
        2,
        "long_words",
        "s",
        "returns the list of words in the string s longer than {k} letters",
        "return [w for w in s.split() if len(w) > {k!r}]",
        _S,
        (2, 3, 4, 5),
    ),
    Spec(
        2,
        "count_letter",
        "s",
        'returns how many times the letter "{k}" occurs in the string s',
        "return s.count({k!r})",
        _S,
        tuple("aeost"),
    ),
    Spec(
        2,
        "capitalize_words",
        "s",
        "returns s with the first letter of every word in upper case",
        "return ' '.join(w.capitalize() for w in s.split())",
        _S,
    ),
    Spec(
        2,
        "remove_negatives",
        "xs",
        "returns the list xs without its negative numbers, in order",
        "return [x for x in xs if x >= 0]",
        _XS,
    ),
    Spec(
        2,
        "count_distinct",
        "xs",
        "returns how many different values the list xs holds",
        "return len(set(xs))",
        _POS,
    ),
    Spec(
        2,
        "word_lengths",
        "s",
        "returns the list of the lengths of the words in the string s",
        "return [len(w) for w in s.split()]",
        _S,
    ),
    Spec(
        2,
        "sort_desc",
        "xs",
        "returns the list xs sorted from largest to smallest",
        "return sorted(xs, reverse=True)",
        _XS,
    ),
    Spec(
        2,
        "digit_sum",
        "n",
        "returns the sum of the decimal digits of the non-negative integer n",
        "return sum(int(d) for d in str(n))",
        lambda rng, k: (rng.randint(0, 99999),),
    ),
    Spec(
        2,
        "starts_with",
        "s",
        'returns how many words of the string s start with the letter "{k}"',
        "return sum(1 for w in s.split() if w.startswith({k!r}))",
        _S,
        tuple("abcst"),
    ),
    Spec(
        2,
        "cap_at",
        "xs",
        "returns a list of the numbers of xs with every number above {k} replaced by {k}",
        "return [min(x, {k!r}) for x in xs]",
        _XS,
        (5, 10, 15),
    ),
    Spec(
        2,
        "join_with",
        "s",
        'returns the string s with every space replaced by "{k}"',
        "return s.replace(' ', {k!r})",
        _S,
        ("_", "-", "."),
    ),
    # level 3: two steps
    Spec(
        3,
        "second_largest",
        "xs",
        "returns the second largest distinct number in the list xs",
        "return sorted(set(xs))[-2]",
        lambda rng, k: (_distinct(rng),),
    ),
    Spec(
        3,
        "dedupe",
        "xs",
        "returns the list xs without repeated values, keeping first occurrences in order",
        "return list(dict.fromkeys(xs))",
        lambda rng, k: (_ints(rng, 0, 6, (4, 8)),),
    ),
    Spec(
        3,
        "longest_word",
        "s",
        "returns the longest word of the string s (the first one if several are)",
        "return max(s.split(), key=len)",
        _S,
    ),
    Spec(
        3,
        "running_sum",
        "xs",
        "returns the list of running totals of xs (the i-th is xs[0] + ... + xs[i])",
        "out, t = [], 0\n    for x in xs:\n        t += x\n        out.append(t)\n    return out",
        _XS,
    ),
    Spec(
        3,
        "differences",
        "xs",
        "returns the list of differences between consecutive numbers of xs",
        "return [b - a for a, b in zip(xs, xs[1:])]",
        _XS,
    ),
    Spec(
        3,
        "is_sorted",
        "xs",
        "returns True when the list xs is in non-decreasing order",
        "return xs == sorted(xs)",
        lambda rng, k: (_maybe_sorted(rng),),
    ),
    Spec(
        3,
        "index_of_max",
        "xs",
        "returns the index of the first largest number in the list xs",
        "return xs.index(max(xs))",
        _XS,
    ),
    Spec(
        3,
        "initials",
        "s",
        "returns the first letters of the words of s in upper case, joined together",
        "return ''.join(w[0].upper() for w in s.split())",
        _S,
    ),
    Spec(
        3,
        "kth_largest",
        "xs",
        "returns the {k}-th largest number in the list xs (counting repeats)",
        "return sorted(xs, reverse=True)[{k!r} - 1]",
        lambda rng, k: (_ints(rng, -9, 20, (5, 8)),),
        (2, 3, 4),
    ),
    Spec(
        3,
        "rotate_left",
        "xs",
        "returns the list xs rotated left by {k} places",
        "return xs[{k!r}:] + xs[:{k!r}]",
        lambda rng, k: (_ints(rng, -9, 20, (4, 7)),),
        (1, 2, 3),
    ),
    Spec(
        3,
        "chunks",
        "xs",
        "returns the list xs cut into consecutive lists of {k} (the last may be shorter)",
        "return [xs[i:i + {k!r}] for i in range(0, len(xs), {k!r})]",
        _XS,
        (2, 3, 4),
    ),
    Spec(
        3,
        "every_kth",
        "xs",
        "returns every {k}-th element of the list xs, starting with the first",
        "return xs[::{k!r}]",
        _XS,
        (2, 3, 4),
    ),
    Spec(
        3,
        "sum_multiples_below",
        "n",
        "returns the sum of the non-negative multiples of {k} below n",
        "return sum(x for x in range(n) if x % {k!r} == 0)",
        _N,
        (3, 4, 5, 6, 7),
    ),
    Spec(
        3,
        "words_of_length",
        "s",
        "returns the list of words of the string s that have exactly {k} letters",
        "return [w for w in s.split() if len(w) == {k!r}]",
        _S,
        (3, 4, 5),
    ),
    Spec(
        3,
        "letter_counts",
        "s",
        "returns a dict from each letter of the word s to how often it occurs",
        "return {{c: s.count(c) for c in s}}",
        _W,
    ),
)
LEVELS = (1, 2, 3)


@dataclass(frozen=True)
class Function:
    """One spec with its parameter: the unit the splits partition."""

    spec: Spec
    k: Any

    @property
    def statement(self) -> str:
        return f"Write a function `{self.spec.name}({self.spec.signature})` that " + (
            self.spec.statement.format(k=self.k) + "."
        )

    @property
    def reference(self) -> str:
        body = self.spec.code.format(k=self.k)
        return f"def {self.spec.name}({self.spec.signature}):\n    {body}\n"


@cache
def _compiled(reference: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(reference, namespace)  # the project's own reference (SPECS), never model text
    return namespace[name]


@cache
def functions(difficulty: int, split: str) -> tuple[Function, ...]:
    """The functions of levels 1 to ``difficulty`` in ``split`` (by :func:`content_split` of their
    statement)."""
    return tuple(
        f
        for s in SPECS
        if s.level <= difficulty
        for f in (Function(s, k) for k in s.ks)
        if content_split(f.statement) == split
    )


def _call(name: str, args: Args) -> str:
    return f"{name}({', '.join(map(repr, args))})"


def make_problem(function: Function, rng: random.Random, tests: int, example: bool, pid: str) -> Problem:
    """One problem: ``tests`` distinct calls of ``function`` with their expected values."""
    ref = _compiled(function.reference, function.spec.name)
    drawn: dict[str, Any] = {}
    for _ in range(20 * tests):
        args = function.spec.inputs(rng, function.k)
        drawn.setdefault(_call(function.spec.name, args), ref(*args))
    # Different expected values first, so a constant (``return False``) cannot pass by luck.
    calls: dict[str, Any] = {}
    for call, value in drawn.items():
        if len(calls) < tests and repr(value) not in {repr(v) for v in calls.values()}:
            calls[call] = value
    for call, value in drawn.items():
        if len(calls) < tests:
            calls.setdefault(call, value)
    first, expected = next(iter(calls.items()))
    prompt = function.statement + (f" For example, `{first}` returns `{expected!r}`." if example else "")
    return Problem(
        id=pid,
        prompt=prompt,
        answer={
            "setup": "",
            "tests": [f"assert {call} == {value!r}" for call, value in calls.items()],
            "reference": function.reference,
        },
        meta={"function": function.spec.name, "k": function.k, "statement": function.statement},
    )


class PyFuncTask(CodeTask):
    """Generated small functions of one level, scored by their asserts in the sandbox."""

    name = "pyfunc"
    prompt_family = "code-function"

    def __init__(
        self,
        difficulty: int = 1,
        size: int = 2000,
        seed: int = 0,
        split: str = "train",
        tests: int = 4,
        example: bool = True,
        limits: Limits | None = None,
    ) -> None:
        check_split(split)
        if split is None:
            raise ValueError(f"split must be one of {list(SPLITS)}, got None")
        if difficulty not in LEVELS:
            raise ValueError(f"difficulty must be one of {LEVELS}, got {difficulty!r}")
        if size < 1 or not 1 <= tests <= 10:
            raise ValueError(f"size must be positive and tests in 1..10, got size={size}, tests={tests}")
        pool = functions(difficulty, split)
        if not pool:
            raise ValueError(f"level {difficulty} has no function in split {split!r}")
        problems = []
        for i in range(size):
            rng = random.Random(derive_seed(seed, "pyfunc", split, difficulty, tests, i))
            problems.append(make_problem(rng.choice(pool), rng, tests, example, f"{split}-{i}"))
        super().__init__(problems, limits)
        self.difficulty, self.split, self.tests, self.example = difficulty, split, tests, example
        self.name = f"pyfunc-d{difficulty}"

    def run_checks(
        self, problem: Problem, answer: str, limits: Limits, measuring: bool = False
    ) -> CheckReport:
        return check_asserts(strip_code_fence(answer), problem.answer["tests"], "", limits)


def pyfunc(
    difficulty: int = 1,
    size: int = 2000,
    seed: int = 0,
    split: str = "train",
    tests: int = 4,
    example: bool = True,
) -> PyFuncTask:
    """``agon/pyfunc-v0``."""
    return PyFuncTask(difficulty, size, seed, split, tests, example)


def counts() -> dict[int, dict[str, int]]:
    """Functions per level and split."""
    return {lv: {s: len(functions(lv, s)) for s in SPLITS} for lv in LEVELS}


if __name__ == "__main__":
    for lv, row in counts().items():
        print(lv, *row.values())
