"""agon/pyfunc-v0's held-out functions are no training template at any constant (issue 58)."""

from __future__ import annotations

import pytest

from agon_env.envs.tasks.base import SPLITS
from agon_env.envs.tasks.pyfunc import LEVELS, SPECS, Function, template_splits
from agon_env.envs.tasks.pyfunc_behaviour import (
    Coincidence,
    by_name,
    clashes,
    coincidences,
    constants,
    drawn_inputs,
    families,
    reference,
    same_behaviour,
    trained_share,
)


def test_same_behaviour_compares_as_the_asserts_do():
    inputs = [(1,), (2,), (5,)]
    assert same_behaviour(lambda n: n * 2, lambda n: n + n, inputs)
    assert same_behaviour(lambda n: n % 2 == 1, lambda n: n % 2, inputs)  # True == 1, as `assert` sees it
    assert not same_behaviour(lambda n: n * 2, lambda n: n * n, inputs)  # agree on 2 only
    assert not same_behaviour(lambda n: n, lambda s: s.upper(), inputs)  # raising is a difference


def test_templates_are_tried_beyond_their_own_constants():
    by = {s.name: s for s in SPECS}
    assert {2, -5, 100} <= set(constants(by["scale"])) and 2 not in by["scale"].ks
    assert {"", "z", "_"} <= set(constants(by["join_with"]))
    assert constants(by["square"]) == (None,)


def test_the_issues_twins_are_found():
    found = set(coincidences())
    assert Coincidence("double_all", None, "scale", 2) in found
    assert Coincidence("words_of_length", 5, "long_words", 4) in found
    assert all(Coincidence("add_k", k, "minus_k", -k) in found for k in range(1, 21))


def test_the_deal_by_name_had_trained_functions_in_test_and_validation():
    # The split before issue 58: double_all (scale at 2) and add_k (minus_k at -k) were two of level
    # 1's six test templates; words_of_length (long_words at 4) was held out at level 3.
    old = by_name()
    assert trained_share(1, old, "test") == pytest.approx(2 / 6)
    assert {c.held for c in clashes(3, old, "validation")} >= {"words_of_length", "no_spaces"}


def test_families_are_exactly_the_templates_that_coincide():
    declared: dict[str, set[str]] = {}
    for s in SPECS:
        declared.setdefault(s.kin, set()).add(s.name)
    assert sorted(map(sorted, declared.values())) == sorted(map(sorted, families()))


@pytest.mark.parametrize("level", LEVELS)
def test_no_function_of_a_split_is_another_splits_template_at_any_constant(level):
    splits = template_splits()
    for split in SPLITS:  # test and validation against train, and train and each other as well
        assert clashes(level, splits, split) == [], (level, split)
        assert trained_share(level, splits, split) == 0.0
    for group in families():
        assert len({splits[n] for n in group}) == 1, sorted(group)  # dealt whole


@pytest.mark.parametrize("level", LEVELS)
def test_every_split_keeps_a_useful_number_of_templates(level):
    splits = template_splits()
    sizes = {sp: sum(s.level <= level and splits[s.name] == sp for s in SPECS) for sp in SPLITS}
    assert min(sizes.values()) >= 6 and sizes["train"] > sizes["test"], sizes


def test_no_function_is_one_value_on_what_its_problems_draw():
    # long_words at k = 5 returned [] on every sentence (no drawn word is longer than five letters),
    # so `return []` passed every one of its problems.
    for s in SPECS:
        for k in s.ks:
            f = reference(Function(s, k))
            assert len({repr(f(*args)) for args in drawn_inputs(s.name, k)}) >= 2, (s.name, k)
