"""The checkable tasks: generators, checkers by hand, splits disjoint, gold always passes."""

from __future__ import annotations

import re

import pytest

import agon_env
from agon_env.conformance import check_env
from agon_env.envs.tasks.base import SPLITS, Problem, normalize_prompt
from agon_env.envs.tasks.checkable import CheckableTask

IDS = ("agon/countdown-v0", "agon/divides-v0", "agon/linear-v0")


def _countdown(numbers: list[int], target: int) -> Problem:
    return Problem("p", "?", "", {"numbers": numbers, "target": target})


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("3 × 7", True),
        ("7*3", True),
        ("3 x 7 = 21", True),
        ("3 \\times 7", True),  # the math family asks for "a number or a LaTeX expression"
        ("$7 \\cdot 3$", True),
        ("\\boxed{3 \\times 7}", True),
        ("(7 - 3) * 2", False),  # uses a number that is not given
        ("21", False),  # the target alone uses neither number
        ("3 × 7 × 1", False),
        ("7 + 7 + 7", False),
        ("__import__('os')", False),
        ("", False),
    ],
)
def test_countdown_checker_by_hand(answer: str, ok: bool) -> None:
    task = CheckableTask("countdown")
    assert task.score(_countdown([3, 7], 21), answer) is ok


def test_countdown_accepts_any_valid_expression_not_only_the_generators() -> None:
    task = CheckableTask("countdown", numbers=3)
    p = _countdown([2, 3, 4], 10)
    assert task.score(p, "(2 × 3) + 4") and task.score(p, "4 × 3 − 2") and not task.score(p, "4 + 3 + 2")


@pytest.mark.parametrize("kind,numbers", [("countdown", 2), ("countdown", 3), ("divides", 2), ("linear", 2)])
def test_every_gold_answer_passes_its_own_checker(kind: str, numbers: int) -> None:
    task = CheckableTask(kind, size=300, numbers=numbers)
    for i in range(len(task)):
        p = task[i]
        assert task.score(p, p.answer), (p.prompt, p.answer)


def test_divides_has_exactly_one_right_option() -> None:
    task = CheckableTask("divides", size=300)
    for i in range(len(task)):
        meta = task[i].meta
        assert [o for o in meta["options"] if meta["number"] % o == 0] == [int(task[i].answer)]


@pytest.mark.parametrize("kind", ["countdown", "divides", "linear"])
def test_splits_share_no_prompt_and_problems_repeat_from_their_seed(kind: str) -> None:
    prompts = {
        s: {normalize_prompt(CheckableTask(kind, 200, split=s)[i].prompt) for i in range(200)} for s in SPLITS
    }
    assert not prompts["train"] & prompts["test"] and not prompts["train"] & prompts["validation"]
    assert not prompts["validation"] & prompts["test"]
    assert CheckableTask(kind, split="test")[5] == CheckableTask(kind, split="test")[5]


@pytest.mark.parametrize("env_id", IDS)
def test_registered_and_conformant(env_id: str) -> None:
    assert env_id in agon_env.registered_ids()
    check_env(env_id)


def test_two_number_countdown_has_enough_distinct_problems_per_split() -> None:
    counts = {
        s: len({CheckableTask("countdown", 2000, split=s)[i].prompt for i in range(2000)}) for s in SPLITS
    }
    assert counts["validation"] >= 40 and counts["test"] >= 100, counts


@pytest.mark.parametrize(
    ("kind", "kwargs", "name"),
    [
        ("countdown", {"largest": 9}, "countdown-2-largest9"),
        ("divides", {"options": 3}, "divides-options3"),
        ("divides", {"options": 2, "largest": 6}, "divides-largest6-options2"),
        ("linear", {"largest": 5}, "linear-largest5"),
    ],
)
def test_sizes_bound_every_operand_and_name_the_task(kind: str, kwargs: dict, name: str) -> None:
    task = CheckableTask(kind, size=300, **kwargs)
    assert task.name == name
    hi = kwargs.get("largest", 12)
    for i in range(len(task)):
        p = task[i]
        assert task.score(p, p.answer), (p.prompt, p.answer)
        m = p.meta
        if kind == "countdown":
            assert max(m["numbers"]) <= hi
        elif kind == "divides":
            assert len(m["options"]) == kwargs.get("options", 4) and max(m["options"]) <= hi + 1
            assert [o for o in m["options"] if m["number"] % o == 0] == [int(p.answer)]
        else:
            assert 1 <= int(p.answer) <= hi and m["a"] <= 9 and m["b"] <= 5 * hi // 2 and m["c"] > 0


def test_the_default_sizes_are_the_registered_ones() -> None:
    assert (
        CheckableTask("countdown").name == "countdown-2"
        and CheckableTask("countdown", numbers=3).name == "countdown-3"
    )
    assert CheckableTask("countdown", largest=20).name == "countdown-2"
    assert agon_env.make("agon/divides-v0", options=3).task.name == "divides-options3"
    with pytest.raises(ValueError, match="options"):
        CheckableTask("divides", options=5)
    with pytest.raises(ValueError, match="largest"):
        CheckableTask("linear", largest=3)
    with pytest.raises(ValueError, match="numbers"):
        CheckableTask("linear", numbers=3)


@pytest.mark.parametrize("env_id", IDS)
def test_each_kind_is_prompted_with_worked_examples_of_its_own_kind(env_id: str) -> None:
    from agon_env.agents.prompts import PROMPT_FAMILIES, family_of

    task = agon_env.make(env_id).task
    family = PROMPT_FAMILIES[family_of(task)]
    assert family_of(task) == task.kind
    question = task[0].prompt

    # The examples ask as the task asks: the same wording with other numbers.
    def shape(text: str) -> str:
        return re.sub(r"[+−]", "±", re.sub(r"\d+", "N", text))

    for q, _ in family.drafter_examples:
        assert shape(q) == shape(question), (q, question)
        assert normalize_prompt(q) not in {normalize_prompt(task[i].prompt) for i in range(50)}
