import itertools

import pytest

from agon_env.evaluation.selection import (
    Candidate,
    SelectionLeakError,
    check_disjoint,
    choose_direction,
    select_then_report,
)
from agon_env.stats import rate


def cand(x, n, tokens=None):
    return Candidate(rate([True] * x + [False] * (n - x)), tokens)


def test_higher_validation_accuracy_wins():
    assert choose_direction({"a→b": cand(3, 10), "b→a": cand(6, 10)}) == "b→a"


def test_ties_go_to_the_shorter_trace_then_the_first_listed():
    assert choose_direction({"a→b": cand(5, 10, 90.0), "b→a": cand(5, 10, 40.0)}) == "b→a"
    assert choose_direction({"a→b": cand(5, 10, 40.0), "b→a": cand(5, 10, 40.0)}) == "a→b"
    assert choose_direction({"b→a": cand(5, 10, 40.0), "a→b": cand(5, 10, 40.0)}) == "b→a"
    assert choose_direction({"a→b": cand(5, 10, None), "b→a": cand(5, 10, 70.0)}) == "b→a"


def test_empty_validation_split_counts_as_worst():
    assert choose_direction({"a→b": cand(0, 0), "b→a": cand(0, 4)}) == "b→a"
    with pytest.raises(ValueError):
        choose_direction({})


def test_the_choice_never_depends_on_test_results():
    val = {"a→b": cand(7, 10, 50.0), "b→a": cand(4, 10, 50.0)}
    ids_v, ids_t = ["validation-0", "validation-1"], ["test-0", "test-1"]
    for ta, tb in itertools.product(range(0, 11, 5), repeat=2):
        test = {"a→b": cand(ta, 10), "b→a": cand(tb, 10)}
        choice, reported = select_then_report(val, test, ids_v, ids_t, test_candidates=test)
        assert choice.chosen == "a→b"
        assert reported is test["a→b"]
        assert choice.test_oracle == ("b→a" if tb > ta else "a→b")
        assert choice.post_hoc_differs == (tb > ta)


def test_overlapping_splits_are_refused():
    check_disjoint(["v1"], ["t1"])
    val = {"a→b": cand(1, 2), "b→a": cand(2, 2)}
    with pytest.raises(SelectionLeakError, match="both the validation and the test"):
        select_then_report(val, {"a→b": 0.1, "b→a": 0.2}, ["p1", "p2"], ["p2", "p3"])


def test_a_validated_direction_needs_a_test_result():
    with pytest.raises(KeyError):
        select_then_report({"a→b": cand(1, 2)}, {}, ["v"], ["t"])


def test_record_is_json_ready():
    choice, _ = select_then_report({"a→b": cand(1, 2, 10.0)}, {"a→b": 1}, ["v"], ["t"])
    d = choice.to_dict()
    assert d["chosen"] == "a→b" and d["validation"]["a→b"]["rate"] == 0.5
    assert d["validation_problems"] == 1 and d["test_oracle"] is None
