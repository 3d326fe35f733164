"""Prompts per task family: format instructions and worked examples that match the task.

A task names its family (``task.prompt_family``): ``arithmetic`` (``agon/arith-v0``),
``math`` (DeepMath, GSM8K, MATH-style and any ``agon/math-v0`` file), ``code-function``
(HumanEval, MBPP: a function with a given signature) and ``code-stdio`` (CodeContests: a
whole program on stdin/stdout). A task that names none gets ``math``. A user task can name
an existing family or one it registers with :func:`register_prompt_family`.

The run config picks the family (``prompts.family``, default: the task's) and whether the
worked examples are shown (``prompts.few_shot``: on for small models, which copy formats
but do not follow format instructions; off for instruction-following ones). Every family's
examples write summaries that state the *method*, not the result, since the summary is
what the other turn reads; the shown drafts of its challenger examples do the same. Each
family words self-refinement (self mode's second turn, the player's own draft) apart from
challenging a rival's draft.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

from agon_env.agents.checkable_prompts import CHECKABLE_FAMILIES
from agon_env.agents.prompts import METHOD_SUMMARY as _FORMAT
from agon_env.agents.prompts import RolePrompts
from agon_env.registry import unknown_id_message

_OWN = "You are shown a problem and the summary of your own earlier draft. Do not trust or paraphrase it:"


MATH = RolePrompts(
    drafter_system=(
        "You are a careful problem solver. Reason step by step, then "
        f"{_FORMAT} the final answer alone in <answer>...</answer> (a number or a LaTeX expression)."
    ),
    challenger_system=(
        "You are a careful verifier. You are shown a problem and a rival's draft summary. "
        "Do not trust or paraphrase the draft: check its method and re-derive the answer yourself. "
        f"Then {_FORMAT} the final answer alone in <answer>...</answer>."
    ),
    drafter_examples=(
        (
            "Find the sum of all positive divisors of 12.",
            "The divisors of 12 are 1, 2, 3, 4, 6 and 12, and 1 + 2 + 3 + 4 + 6 + 12 = 28.\n"
            "<summary>Listed every divisor of 12 and added them.</summary>\n<answer>28</answer>",
        ),
        (
            "Solve for $x$: $2x + 3 = 11$.",
            "Subtracting 3 gives $2x = 8$, and dividing by 2 gives $x = 4$.\n"
            "<summary>Undid the addition, then the multiplication.</summary>\n<answer>4</answer>",
        ),
    ),
    challenger_examples=(
        (
            "How many positive integers less than 100 are multiples of 6?",
            "Divided 100 by 6 and rounded up.",
            "Check: rounding 100/6 up counts 17 multiples, but 17 · 6 = 102 is not below 100. "
            "The multiples are 6, 12, ..., 96, and 96 / 6 = 16. The draft's method is wrong.\n"
            "<summary>Counted the multiples of 6 up to the largest one below 100.</summary>\n"
            "<answer>16</answer>",
        ),
        (
            "Solve $x^2 = 49$ for $x > 0$.",
            "Took the positive square root of 49.",
            "Check: $7^2 = 49$ and $7 > 0$, so the positive root is right. The draft's method is right.\n"
            "<summary>The positive square root of 49.</summary>\n<answer>7</answer>",
        ),
    ),
    self_system=(
        f"You are a careful problem solver checking your own work. {_OWN} check its method and "
        f"re-derive the answer yourself. Then {_FORMAT} the final answer alone in <answer>...</answer>."
    ),
    self_examples=(
        (
            "How many positive integers less than 60 are multiples of 8?",
            "Divided 60 by 8 and rounded up.",
            "Check: rounding 60/8 up counts 8 multiples, but 8 · 8 = 64 is not below 60. "
            "The multiples are 8, 16, ..., 56, and 56 / 8 = 7. My draft's method was wrong.\n"
            "<summary>Counted the multiples of 8 up to the largest one below 60.</summary>\n"
            "<answer>7</answer>",
        ),
        (
            "Solve for $x$: $3x = 12$.",
            "Divided both sides by 3.",
            "Check: $3 \\cdot 4 = 12$, so dividing by 3 solves it. My draft's method was right.\n"
            "<summary>Divided both sides by 3.</summary>\n<answer>4</answer>",
        ),
    ),
)

_CODE_ANSWER = "the code alone, in a ```python block, inside <answer>...</answer>"

CODE_FUNCTION = RolePrompts(
    drafter_system=(
        "You write correct Python. Think through the task and its edge cases briefly, then "
        f"{_FORMAT} {_CODE_ANSWER}. Define the function with exactly the requested name and arguments."
    ),
    challenger_system=(
        "You are a careful code reviewer. You are shown a task and a rival's draft summary. "
        "Do not trust or paraphrase the draft: check its approach on the edge cases and write "
        f"the function yourself. Then {_FORMAT} {_CODE_ANSWER}."
    ),
    drafter_examples=(
        (
            "Write a function `is_even(n)` that returns True when the integer n is even.",
            "An integer is even exactly when n % 2 == 0; this also holds for negative n.\n"
            "<summary>Test the remainder modulo 2.</summary>\n"
            "<answer>\n```python\ndef is_even(n):\n    return n % 2 == 0\n```\n</answer>",
        ),
        (
            "Write a function `count_vowels(s)` that counts the vowels a, e, i, o, u in s, any case.",
            "Lower-case the string once, then count the characters that are vowels.\n"
            "<summary>Count characters of the lower-cased string that are in 'aeiou'.</summary>\n"
            "<answer>\n```python\ndef count_vowels(s):\n"
            "    return sum(c in 'aeiou' for c in s.lower())\n```\n</answer>",
        ),
    ),
    challenger_examples=(
        (
            "Write a function `last(xs)` that returns the last element of a non-empty list.",
            "Return xs[len(xs)].",
            "Check: xs[len(xs)] is one past the end and raises IndexError; the last element is "
            "xs[-1]. The draft's approach is wrong.\n<summary>Index -1 is the last element.</summary>\n"
            "<answer>\n```python\ndef last(xs):\n    return xs[-1]\n```\n</answer>",
        ),
        (
            "Write a function `total(xs)` that returns the sum of a list of numbers (0 for an empty list).",
            "Use the built-in sum.",
            "Check: sum(xs) adds every element and gives 0 for an empty list. The draft's approach is "
            "right.\n<summary>The built-in sum over the list.</summary>\n"
            "<answer>\n```python\ndef total(xs):\n    return sum(xs)\n```\n</answer>",
        ),
    ),
    self_system=(
        f"You write correct Python and check your own work. {_OWN} check its approach on the edge "
        f"cases and write the function again yourself. Then {_FORMAT} {_CODE_ANSWER}."
    ),
    self_examples=(
        (
            "Write a function `first(xs)` that returns the first element of a non-empty list.",
            "Return xs[1].",
            "Check: xs[1] is the second element; the first is xs[0]. My draft's approach was wrong.\n"
            "<summary>Index 0 is the first element.</summary>\n"
            "<answer>\n```python\ndef first(xs):\n    return xs[0]\n```\n</answer>",
        ),
        (
            "Write a function `biggest(xs)` that returns the largest number in a non-empty list.",
            "Use the built-in max.",
            "Check: max(xs) returns the largest element of a non-empty list. My draft's approach was "
            "right.\n<summary>The built-in max over the list.</summary>\n"
            "<answer>\n```python\ndef biggest(xs):\n    return max(xs)\n```\n</answer>",
        ),
    ),
)

CODE_STDIO = RolePrompts(
    drafter_system=(
        "You write correct Python programs that read the input from stdin and print the answer "
        f"to stdout. Think through the task and its limits briefly, then {_FORMAT} "
        f"{_CODE_ANSWER}: a complete program, no prompts for input."
    ),
    challenger_system=(
        "You are a careful code reviewer. You are shown a problem and a rival's draft summary. "
        "Do not trust or paraphrase the draft: check its approach on the edge cases and write the "
        f"program yourself. Then {_FORMAT} {_CODE_ANSWER}: a complete program reading stdin."
    ),
    drafter_examples=(
        (
            "Two integers a and b are given on one line. Print their sum.",
            "Read the line, split it, convert both parts and print the sum.\n"
            "<summary>Parse both integers from stdin and print their sum.</summary>\n"
            "<answer>\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\n</answer>",
        ),
        (
            "The first line holds n, the second n integers. Print how many of them are negative.",
            "Read n, then the list, and count the values below zero.\n"
            "<summary>Count the values below zero on the second line.</summary>\n"
            "<answer>\n```python\nn = int(input())\nxs = list(map(int, input().split()))\n"
            "print(sum(x < 0 for x in xs))\n```\n</answer>",
        ),
    ),
    challenger_examples=(
        (
            "The first line holds n, the second n integers. Print the largest of them.",
            "Sort the numbers and print the first one.",
            "Check: after an ascending sort the first number is the smallest, not the largest. "
            "The draft's approach is wrong.\n<summary>Print the maximum of the second line.</summary>\n"
            "<answer>\n```python\nn = int(input())\nprint(max(map(int, input().split())))\n```\n</answer>",
        ),
        (
            "A single line holds a word. Print it reversed.",
            "Print the string sliced with step -1.",
            "Check: s[::-1] reverses the string, and input() drops the newline. The draft's approach is "
            "right.\n<summary>Reverse the word with a step -1 slice.</summary>\n"
            "<answer>\n```python\nprint(input()[::-1])\n```\n</answer>",
        ),
    ),
    self_system=(
        "You write correct Python programs that read stdin and print to stdout, and check your own "
        f"work. {_OWN} check its approach on the edge cases and write the program again yourself. "
        f"Then {_FORMAT} {_CODE_ANSWER}: a complete program reading stdin."
    ),
    self_examples=(
        (
            "The first line holds n, the second n integers. Print their sum.",
            "Add up the numbers on the first line.",
            "Check: the first line holds only n; the numbers to add are on the second line. "
            "My draft's approach was wrong.\n<summary>Sum the integers on the second line.</summary>\n"
            "<answer>\n```python\nn = int(input())\nprint(sum(map(int, input().split())))\n```\n</answer>",
        ),
        (
            "A single line holds a word. Print it in upper case.",
            "Print the word with str.upper().",
            "Check: input().upper() upper-cases every letter, and input() drops the newline. My draft's "
            "approach was right.\n<summary>Upper-case the word with str.upper().</summary>\n"
            "<answer>\n```python\nprint(input().upper())\n```\n</answer>",
        ),
    ),
)

PROMPT_FAMILIES: dict[str, RolePrompts] = {
    "arithmetic": RolePrompts(),
    "math": MATH,
    "code-function": CODE_FUNCTION,
    "code-stdio": CODE_STDIO,
    **CHECKABLE_FAMILIES,  # countdown, divides, linear: agon_env.agents.checkable_prompts
}
"""Prompts by family name; :class:`RolePrompts`'s own defaults are the arithmetic family."""

DEFAULT_FAMILY = "math"
"""The family of a task that names none (a final answer in ``<answer>``, reasoning first)."""


def register_prompt_family(name: str, prompts: RolePrompts) -> None:
    """Add a family a task can name in ``prompt_family``; re-registering a name is an error."""
    if name in PROMPT_FAMILIES:
        raise ValueError(f"prompt family {name!r} is already registered")
    default = RolePrompts()
    if (
        prompts.self_examples == default.self_examples
        and prompts.challenger_examples != default.challenger_examples
    ):
        # Arithmetic self-refinement examples on another task would teach the wrong format.
        warnings.warn(
            f"prompt family {name!r} sets no self_examples: self mode shows its challenger examples "
            "(which speak of a rival's draft); set self_system and self_examples for self-refinement",
            stacklevel=2,
        )
        prompts = replace(prompts, self_examples=prompts.challenger_examples)
    PROMPT_FAMILIES[name] = prompts


_DEFAULTED: set[str] = set()
"""Tasks already told that they fell back to the default family (once per task per process)."""


def family_of(task: Any, family: str | None = None) -> str:
    """``family`` if given, else the task's own ``prompt_family``, else :data:`DEFAULT_FAMILY`
    (said once per task: a code task would otherwise be prompted with math examples unawares)."""
    name = family or getattr(task, "prompt_family", None)
    if name is None:
        task_name = str(getattr(task, "name", type(task).__name__))
        if task_name not in _DEFAULTED:
            _DEFAULTED.add(task_name)
            warnings.warn(
                f"task {task_name!r} names no prompt_family: agents use the {DEFAULT_FAMILY!r} family's "
                f"worked examples (set prompt_family on the task, one of {sorted(PROMPT_FAMILIES)}, "
                "or --prompts.family)",
                stacklevel=2,
            )
        name = DEFAULT_FAMILY
    if name not in PROMPT_FAMILIES:
        raise ValueError(unknown_id_message("prompt family", name, sorted(PROMPT_FAMILIES)))
    return name


def prompts_for(task: Any, family: str | None = None, few_shot: bool = True) -> RolePrompts:
    """The :class:`RolePrompts` an agent uses on ``task`` (see :func:`family_of`)."""
    return replace(PROMPT_FAMILIES[family_of(task, family)], few_shot=few_shot)
