"""Prompt families of the checkable tasks (``agon/countdown-v0``, ``divides-v0``, ``linear-v0``).

SmolLM2-135M copies the format of its worked examples, not its instructions
(:mod:`agon_env.agents.prompts`). Under the ``math`` family's examples (divisor sums,
``2x + 3 = 11``) it solved 0–1 % of these tasks: it wrote LaTeX derivations that ran out of
the 80-token budget, and almost never an expression in the tags (``docs/benchmarks.md``,
the probe table). Each kind therefore gets examples of its own kind, with other numbers:
the drafter writes the one short computation that finds the answer (countdown: the
operations on the two numbers until one makes the target -- ``numbers=3`` is shown the same
two-number examples; divides: the number as a product; linear: the inverse steps), and the
reader checks the way the task is built to be checked (evaluate the
draft's operation, multiply back, substitute). Summaries state the method, not the result,
as in every family; the countdown summary names the operation, which is its method.

Registered in :data:`agon_env.agents.prompts.PROMPT_FAMILIES` under the task kinds'
names, which :class:`agon_env.envs.tasks.checkable.CheckableTask` names as its family.
"""

from __future__ import annotations

from agon_env.agents.prompt_families import METHOD_SUMMARY as _FORMAT
from agon_env.agents.prompt_families import RolePrompts

_OWN = "You are shown a problem and the summary of your own earlier draft. Do not trust or paraphrase it:"
_ANSWER = "the answer alone in <answer>...</answer>"


def _family(task: str, check: str, examples: dict[str, tuple]) -> RolePrompts:
    """One kind's prompts: ``task`` is what the solver does, ``check`` how a reader checks it."""
    return RolePrompts(
        drafter_system=f"You are a careful problem solver. {task} Then {_FORMAT} {_ANSWER}.",
        challenger_system=(
            "You are a careful verifier. You are shown a problem and a rival's draft summary. "
            f"Do not trust or paraphrase the draft: {check} Then {_FORMAT} {_ANSWER}."
        ),
        self_system=(
            f"You are a careful problem solver checking your own work. {_OWN} {check} "
            f"Then {_FORMAT} {_ANSWER}."
        ),
        drafter_examples=examples["draft"],
        challenger_examples=examples["challenge"],
        self_examples=examples["self"],
    )


def _countdown_q(a: int, b: int, target: int) -> str:
    # Worded exactly as agon/countdown-v0 asks (two numbers), other numbers.
    return (
        f"Use each of {a} and {b} exactly once, with +, − or × (and parentheses), to make {target}. "
        "Answer with the expression."
    )


COUNTDOWN = _family(
    "Try the operations on the numbers until one makes the target, and answer with that expression.",
    "try each operation on the numbers yourself and check which one makes the target.",
    {
        "draft": (
            (
                _countdown_q(3, 5, 15),
                "3 + 5 = 8, 3 × 5 = 15.\n"
                "<summary>Multiplied the two numbers.</summary>\n<answer>3 × 5</answer>",
            ),
            (
                _countdown_q(4, 9, 5),
                "4 + 9 = 13, 4 × 9 = 36, 9 − 4 = 5.\n"
                "<summary>Subtracted the smaller number from the larger.</summary>\n<answer>9 − 4</answer>",
            ),
        ),
        "challenge": (
            (
                _countdown_q(2, 6, 8),
                "Multiplied the two numbers.",
                "Check: 2 × 6 = 12, not 8. 2 + 6 = 8, 6 − 2 = 4. The draft's method is wrong.\n"
                "<summary>Added the two numbers.</summary>\n<answer>2 + 6</answer>",
            ),
            (
                _countdown_q(3, 7, 4),
                "Subtracted the smaller number from the larger.",
                "Check: 7 − 3 = 4, the target. The draft's method is right.\n"
                "<summary>Subtracted the smaller number from the larger.</summary>\n<answer>7 − 3</answer>",
            ),
        ),
        "self": (
            (
                _countdown_q(4, 5, 20),
                "Added the two numbers.",
                "Check: 4 + 5 = 9, not 20. 5 − 4 = 1, 4 × 5 = 20. My draft's method was wrong.\n"
                "<summary>Multiplied the two numbers.</summary>\n<answer>4 × 5</answer>",
            ),
            (
                _countdown_q(2, 8, 10),
                "Added the two numbers.",
                "Check: 2 + 8 = 10, the target. My draft's method was right.\n"
                "<summary>Added the two numbers.</summary>\n<answer>2 + 8</answer>",
            ),
        ),
    },
)


def _divides_q(options: tuple[int, ...], number: int) -> str:
    listed = ", ".join(map(str, options[:-1])) + f" and {options[-1]}"
    return f"Which one of {listed} divides {number} exactly? Answer with that number."


DIVIDES = _family(
    "Find the option the number is a multiple of, by writing the number as that option times another.",
    "multiply back yourself and check which option divides the number.",
    {
        "draft": (
            (
                _divides_q((4, 5, 8, 9), 27),
                "27 = 9 × 3.\n<summary>Wrote the number as an option times another number.</summary>\n"
                "<answer>9</answer>",
            ),
            (
                _divides_q((3, 7, 10, 11), 56),
                "56 = 7 × 8.\n<summary>Wrote the number as an option times another number.</summary>\n"
                "<answer>7</answer>",
            ),
        ),
        "challenge": (
            (
                _divides_q((3, 7, 8, 9), 28),
                "Took the largest option.",
                "Check: 28 is not 9 times a whole number; 28 = 7 × 4. The draft's method is wrong.\n"
                "<summary>Wrote the number as an option times another number.</summary>\n<answer>7</answer>",
            ),
            (
                _divides_q((2, 4, 6, 11), 33),
                "Took the largest option.",
                "Check: 33 = 11 × 3. The draft's method is right.\n"
                "<summary>Wrote the number as an option times another number.</summary>\n<answer>11</answer>",
            ),
        ),
        "self": (
            (
                _divides_q((4, 6, 7, 10), 35),
                "Took the smallest option.",
                "Check: 35 is not 4 times a whole number; 35 = 7 × 5. My draft's method was wrong.\n"
                "<summary>Wrote the number as an option times another number.</summary>\n<answer>7</answer>",
            ),
            (
                _divides_q((3, 8, 10, 11), 27),
                "Took the smallest option.",
                "Check: 27 = 3 × 9. My draft's method was right.\n"
                "<summary>Wrote the number as an option times another number.</summary>\n<answer>3</answer>",
            ),
        ),
    },
)


def _linear_q(a: int, sign: str, b: int, c: int) -> str:
    return f"Find x such that {a}x {sign} {b} = {c}."


LINEAR = _family(
    "Undo the addition or subtraction, then the multiplication.",
    "solve it yourself, then substitute your x back into the equation.",
    {
        "draft": (
            (
                _linear_q(3, "+", 4, 19),
                "3x = 19 − 4 = 15, so x = 15 ÷ 3 = 5.\n"
                "<summary>Subtracted 4, then divided by 3.</summary>\n<answer>5</answer>",
            ),
            (
                _linear_q(2, "−", 5, 7),
                "2x = 7 + 5 = 12, so x = 12 ÷ 2 = 6.\n"
                "<summary>Added 5, then divided by 2.</summary>\n<answer>6</answer>",
            ),
        ),
        "challenge": (
            (
                _linear_q(4, "+", 2, 22),
                "Added 2, then divided by 4.",
                "Check: the 2 must be subtracted. 4x = 22 − 2 = 20, x = 20 ÷ 4 = 5, and 4 × 5 + 2 = 22. "
                "The draft's method is wrong.\n"
                "<summary>Subtracted 2, then divided by 4.</summary>\n<answer>5</answer>",
            ),
            (
                _linear_q(5, "−", 4, 11),
                "Added 4, then divided by 5.",
                "Check: 5x = 11 + 4 = 15, x = 15 ÷ 5 = 3, and 5 × 3 − 4 = 11. The draft's method is right.\n"
                "<summary>Added 4, then divided by 5.</summary>\n<answer>3</answer>",
            ),
        ),
        "self": (
            (
                _linear_q(3, "−", 2, 13),
                "Subtracted 2, then divided by 3.",
                "Check: the 2 must be added. 3x = 13 + 2 = 15, x = 15 ÷ 3 = 5, and 3 × 5 − 2 = 13. "
                "My draft's method was wrong.\n"
                "<summary>Added 2, then divided by 3.</summary>\n<answer>5</answer>",
            ),
            (
                _linear_q(2, "+", 7, 15),
                "Subtracted 7, then divided by 2.",
                "Check: 2x = 15 − 7 = 8, x = 8 ÷ 2 = 4, and 2 × 4 + 7 = 15. My draft's method was right.\n"
                "<summary>Subtracted 7, then divided by 2.</summary>\n<answer>4</answer>",
            ),
        ),
    },
)

CHECKABLE_FAMILIES: dict[str, RolePrompts] = {"countdown": COUNTDOWN, "divides": DIVIDES, "linear": LINEAR}
"""Family name (the task kind) -> its prompts."""
