"""The table of ``agon/pyfunc-v0``'s functions (:data:`SPECS`): what each asks for, its reference
solution and how its inputs are drawn, by level. :mod:`agon_env.envs.tasks.pyfunc` turns them
into problems and splits; adding a kind of function is a row here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    family: str = ""
    """The template this one behaves as at some constant (``scale`` for ``double_all``, which is
    ``scale`` at k = 2); a family is dealt to one split whole
    (:mod:`agon_env.envs.tasks.pyfunc_behaviour` finds them). Empty: its own."""

    @property
    def kin(self) -> str:
        """The family's name: :attr:`family`, or the template's own name."""
        return self.family or self.name


_XS: Inputs = lambda rng, k: (_ints(rng),)  # noqa: E731
_POS: Inputs = lambda rng, k: (_ints(rng, 0, 30),)  # noqa: E731
_S: Inputs = lambda rng, k: (_sentence(rng),)  # noqa: E731
_W: Inputs = lambda rng, k: (_word(rng),)  # noqa: E731
_N: Inputs = lambda rng, k: (rng.randint(0, 99),)  # noqa: E731

SPECS: tuple[Spec, ...] = (
    # level 1: one expression over one builtin or idiom
    Spec(
        1,
        "reverse_string",
        "s",
        "returns the string s reversed",
        "return s[::-1]",
        _W,
        family="reverse_string",
    ),
    Spec(
        1,
        "reverse_words",
        "s",
        "returns the words of s in reverse order, joined by single spaces",
        "return ' '.join(s.split()[::-1])",
        _S,
    ),
    Spec(1, "to_upper", "s", "returns the string s in upper case", "return s.upper()", _S),
    Spec(
        1,
        "smallest",
        "xs",
        "returns the smallest number in the non-empty list xs",
        "return min(xs)",
        _XS,
        family="largest",
    ),
    Spec(1, "first_word", "s", "returns the first word of the string s", "return s.split()[0]", _S),
    Spec(
        1,
        "last_char",
        "s",
        "returns the last character of the non-empty string s",
        "return s[-1]",
        _W,
        family="reverse_string",
    ),
    Spec(
        1,
        "is_palindrome",
        "s",
        "returns True when the string s reads the same backwards",
        "return s == s[::-1]",
        _W,
    ),
    Spec(1, "square", "n", "returns the square of the integer n", "return n * n", _N),
    Spec(
        1,
        "count_words",
        "s",
        "returns how many words the string s has",
        "return len(s.split())",
        _S,
        family="count_words",
    ),
    Spec(1, "is_odd", "n", "returns True when the integer n is odd", "return n % 2 == 1", _N),
    Spec(
        1,
        "double_all",
        "xs",
        "returns a list of every number in xs doubled",
        "return [x * 2 for x in xs]",
        _XS,
        family="scale",
    ),
    Spec(
        1,
        "count_items",
        "xs",
        "returns how many elements the list xs has",
        "return len(xs)",
        _XS,
        family="count_items",
    ),
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
        family="times_k",
    ),
    Spec(1, "add_k", "n", "returns n plus {k}", "return n + {k!r}", _N, tuple(range(1, 21)), family="add_k"),
    Spec(
        1, "minus_k", "n", "returns n minus {k}", "return n - {k!r}", _N, tuple(range(1, 21)), family="add_k"
    ),
    Spec(
        1,
        "times_k",
        "n",
        "returns n multiplied by {k}",
        "return n * {k!r}",
        _N,
        tuple(range(2, 13)),
        family="times_k",
    ),
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
        1,
        "no_spaces",
        "s",
        "returns the string s with its spaces removed",
        "return s.replace(' ', '')",
        _S,
        family="no_spaces",
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
        family="scale",
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
        family="reverse_string",
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
    Spec(
        1,
        "largest",
        "xs",
        "returns the largest number in the non-empty list xs",
        "return max(xs)",
        _XS,
        family="largest",
    ),
    Spec(1, "sum_list", "xs", "returns the sum of the numbers in the list xs", "return sum(xs)", _XS),
    Spec(1, "first_item", "xs", "returns the first element of the non-empty list xs", "return xs[0]", _XS),
    Spec(
        1,
        "absolute",
        "n",
        "returns the absolute value of the integer n",
        "return abs(n)",
        lambda rng, k: (rng.randint(-50, 50),),
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
        family="count_items",
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
        (2, 3, 4),
        family="long_words",
    ),
    Spec(
        2,
        "count_letter",
        "s",
        'returns how many times the letter "{k}" occurs in the string s',
        "return s.count({k!r})",
        _S,
        tuple("aeost"),
        family="count_words",
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
        family="count_words",
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
        family="no_spaces",
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
        family="largest",
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
        family="reverse_string",
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
        family="long_words",
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
