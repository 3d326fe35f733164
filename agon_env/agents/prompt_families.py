"""The words an agent adds to an observation, in one place: every family's role instructions
and worked examples (:mod:`agon_env.agents.prompts` renders them).

A task names its family (``task.prompt_family``): ``arithmetic`` (``agon/arith-v0``),
``math`` (DeepMath, GSM8K, MATH-style and any ``agon/math-v0`` file), ``code-function``
(HumanEval, MBPP: a function with a given signature) and ``code-stdio`` (CodeContests: a
whole program on stdin/stdout). A task that names none gets ``math``; a user task can name
one it registers with :func:`agon_env.agents.prompts.register_prompt_family`. The three
system messages (drafting,
challenging a rival's draft, refining one's own in self mode) share one frame,
:class:`Instructions`; the challenger's user turn is the env's
(:func:`agon_env.vocabulary.challenger_text`).

The run config picks the family (``prompts.family``, default: the task's) and whether the
worked examples are shown (``prompts.few_shot``: on for small models, which copy formats
but do not follow format instructions). Every example's summary states the *method*, not
the result, since the summary is what the other turn reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

METHOD_SUMMARY = "write a short <summary>...</summary> of your method (not its result) and"
"""The summary is what the other turn reads, so every family asks for the method only: a
summary that states the result hands it over instead of something to check."""


@dataclass(frozen=True)
class Instructions:
    """A family's role instructions in its own words; :meth:`systems` puts them in the frame
    every family shares, so the three roles' instructions are worded once."""

    solver: str
    """Who drafts, e.g. ``You are a careful problem solver.``"""
    work: str
    """How the drafter works before it answers, e.g. ``Reason step by step``."""
    verifier: str
    """Who challenges a rival's draft, e.g. ``You are a careful verifier.``"""
    reviser: str
    """Who refines its own draft (self mode)."""
    check: str
    """What the challenger does with the draft before answering (``yourself`` follows)."""
    answer: str
    """What the final answer is and where it goes, e.g. ``the final result in <answer>...</answer>``."""
    draft_answer: str | None = None
    """The drafter's version of ``answer`` where it says more (None = ``answer``)."""
    recheck: str | None = None
    """What self-refinement does with its own draft (None = ``check``)."""
    shown: str = "a problem"
    """What the challenger is told it is shown besides the draft."""

    def systems(self) -> dict[str, str]:
        """The drafter's, challenger's and self-refiner's system messages (:class:`RolePrompts` keys)."""
        draft, then = self.draft_answer or self.answer, f"Then {METHOD_SUMMARY} {self.answer}."
        return {
            "drafter_system": f"{self.solver} {self.work}, then {METHOD_SUMMARY} {draft}.",
            "challenger_system": (
                f"{self.verifier} You are shown {self.shown} and a rival's draft summary. "
                f"Do not trust or paraphrase the draft: {self.check} yourself. {then}"
            ),
            "self_system": (
                f"{self.reviser} You are shown a problem and the summary of your own earlier draft. "
                f"Do not trust or paraphrase it: {self.recheck or self.check} yourself. {then}"
            ),
        }


def _rederive(what: str) -> str:  # how the answer-only families check a draft
    return f"check its method and re-derive the {what}"


def _rewrite(what: str, again: str = "") -> str:  # how the code families check a draft
    return f"check its approach on the edge cases and write the {what}{again}"


ARITHMETIC_INSTRUCTIONS = Instructions(
    solver="You are a careful problem solver.",
    work="Reason step by step",
    verifier="You are a careful verifier.",
    reviser="You are a careful problem solver checking your own work.",
    check=_rederive("result"),
    answer="the final result in <answer>...</answer>",
)
ARITHMETIC_SYSTEMS = ARITHMETIC_INSTRUCTIONS.systems()


# Worked turns: (user, assistant). Short arithmetic, matching how agon/arith-v0 asks. The
# summaries name the method and never the result (the reasoning line may state it).
DRAFTER_EXAMPLES: tuple[tuple[str, str], ...] = (
    (
        "What is 3 + 4?",
        "3 + 4 = 7.\n<summary>Added 4 to 3.</summary>\n<answer>7</answer>",
    ),
    (
        "What is 6 * 7?",
        "6 * 7 = 42.\n<summary>Multiplied 6 by 7.</summary>\n<answer>42</answer>",
    ),
)
# One wrong draft, one right one: the challenger must learn to check, not to contradict. The
# shown drafts are summaries as a drafter taught by the examples above writes them.
CHALLENGER_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "What is 5 + 8?",
        "Multiplied 5 by 8.",
        "Check: the question adds 5 and 8, it does not multiply them; 5 + 8 = 13. The draft is wrong.\n"
        "<summary>Added 8 to 5 instead of multiplying.</summary>\n<answer>13</answer>",
    ),
    (
        "What is 9 - 4?",
        "Subtracted 4 from 9.",
        "Check: 9 - 4 = 5, and subtracting 4 from 9 is what the question asks. The draft is right.\n"
        "<summary>Subtracted 4 from 9, as the draft did.</summary>\n<answer>5</answer>",
    ),
)
# Self-refinement reads the player's own draft: the same check, worded as one's own.
SELF_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "What is 7 + 6?",
        "Multiplied 7 by 6.",
        "Check: the question adds 7 and 6, but my draft multiplied them; 7 + 6 = 13. My draft was wrong.\n"
        "<summary>Added 6 to 7 instead of multiplying.</summary>\n<answer>13</answer>",
    ),
    (
        "What is 8 * 3?",
        "Multiplied 8 by 3.",
        "Check: 8 * 3 = 24, and multiplying 8 by 3 is what the question asks. My draft was right.\n"
        "<summary>Multiplied 8 by 3, as my draft did.</summary>\n<answer>24</answer>",
    ),
)


@dataclass
class RolePrompts:
    """What an agent adds to an observation: a system message and worked examples per role (its
    defaults are the arithmetic family)."""

    drafter_system: str | None = ARITHMETIC_SYSTEMS["drafter_system"]
    """System message for role 0; ``None`` leaves the model's default system prompt."""
    challenger_system: str | None = ARITHMETIC_SYSTEMS["challenger_system"]
    """System message for role 1 when a rival's draft is shown."""
    few_shot: bool = True
    """Prepend the worked examples as user/assistant turns (needed for small models)."""
    drafter_examples: Sequence[tuple[str, str]] = field(default_factory=lambda: DRAFTER_EXAMPLES)
    """``(question, completion)`` pairs shown before a drafting question."""
    challenger_examples: Sequence[tuple[str, str, str]] = field(default_factory=lambda: CHALLENGER_EXAMPLES)
    """``(question, draft summary, completion)`` triples shown before a challenge."""
    self_system: str | None = ARITHMETIC_SYSTEMS["self_system"]
    """System message for role 1 when the draft shown is the player's own (``obs["own"]``)."""
    self_examples: Sequence[tuple[str, str, str]] = field(default_factory=lambda: SELF_EXAMPLES)
    """``(question, own draft summary, completion)`` triples shown before a self-refinement."""


MATH = RolePrompts(
    **replace(  # arithmetic's roles, answering with the final answer alone
        ARITHMETIC_INSTRUCTIONS,
        check=_rederive("answer"),
        answer="the final answer alone in <answer>...</answer>",
        draft_answer="the final answer alone in <answer>...</answer> (a number or a LaTeX expression)",
    ).systems(),
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
_REVIEWER = "You are a careful code reviewer."
_PROGRAMS = "You write correct Python programs that"

CODE_FUNCTION = RolePrompts(
    **Instructions(
        solver="You write correct Python.",
        work="Think through the task and its edge cases briefly",
        verifier=_REVIEWER,
        reviser="You write correct Python and check your own work.",
        check=_rewrite("function"),
        recheck=_rewrite("function", " again"),
        answer=_CODE_ANSWER,
        draft_answer=f"{_CODE_ANSWER}. Define the function with exactly the requested name and arguments",
        shown="a task",
    ).systems(),
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
    **Instructions(
        solver=f"{_PROGRAMS} read the input from stdin and print the answer to stdout.",
        work="Think through the task and its limits briefly",
        verifier=_REVIEWER,
        reviser=f"{_PROGRAMS} read stdin and print to stdout, and check your own work.",
        check=_rewrite("program"),
        recheck=_rewrite("program", " again"),
        answer=f"{_CODE_ANSWER}: a complete program reading stdin",
        draft_answer=f"{_CODE_ANSWER}: a complete program, no prompts for input",
    ).systems(),
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
