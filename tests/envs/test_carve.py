"""``carve`` names an empty or 1-problem split and says how many problems each split needs."""

from __future__ import annotations

import warnings

import pytest

from agon_env.envs.tasks.base import Problem, carve, content_split


def _problems(n: int) -> list[Problem]:
    return [Problem(str(i), f"Write a function `add_{i}(x)` that returns x + {i}.", None) for i in range(n)]


def test_an_empty_split_is_refused_naming_it_and_the_counts() -> None:
    two = _problems(2)
    assert [content_split(p.prompt) for p in two] == ["train", "train"]  # the docs' old Adders case
    with pytest.raises(ValueError, match=r"carve: split 'test' has 0 of 2 problems") as exc:
        carve(two, "test")
    text = str(exc.value)
    assert "(train / validation / test: 2 / 0 / 0)" in text
    assert "1 train problem, agon eval 1 validation problem, the held-out check 10 test problems" in text


def test_a_one_problem_split_is_warned_about() -> None:
    few = _problems(12)
    sizes = {s: len([p for p in few if content_split(p.prompt) == s]) for s in ("validation", "test")}
    single = next(s for s, n in sizes.items() if n == 1)
    with pytest.warns(UserWarning, match=rf"carve: split '{single}' has 1 of 12 problems"):
        assert len(carve(few, single)) == 1


def test_enough_problems_split_quietly() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [len(carve(_problems(60), s)) for s in ("train", "validation", "test")] == [41, 6, 13]
        assert len(carve(_problems(2), None)) == 2  # None keeps all, however few
