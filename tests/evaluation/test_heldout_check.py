"""check_heldout: test and validation are each checked against every training pool."""

from types import SimpleNamespace

import pytest

from agon_env.evaluation.splits import EvalData, OverlapError, Part, check_heldout


def _task(*prompts: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(prompt=p, id=str(i)) for i, p in enumerate(prompts)]


def _data() -> EvalData:
    test = _task("What is 1 + 1?", "What is 2 + 2?")
    val = _task("What is 3 + 3?", "What is  4 + 4 ?")
    return EvalData("agon/arith-v0", Part(test, [0, 1]), Part(val, [0, 1]))


# Validation's "4 + 4" is in the pool (whitespace differs: prompts compare normalised); test is clean.
POOL = _task("what is 4 + 4 ?", "What is 9 + 9?")


def test_validation_in_a_training_pool_is_refused():
    with pytest.raises(OverlapError, match=r"1 of 2 validation prompts occur in the training pool of run-a"):
        check_heldout(_data(), [("run-a", POOL)])


def test_validation_overlap_is_recorded_when_allowed():
    data = _data()
    found = check_heldout(data, [("run-a", POOL), ("run-b", _task("What is 3 + 3?", "What is 1 + 1?"))], True)
    assert data.check is found and found["allowed_overlap"]
    assert found["test_and_validation"] == 0
    assert found["test_and_training"] == {"run-a": 0, "run-b": 1}
    assert found["validation_and_training"] == {"run-a": 1, "run-b": 1}


def test_disjoint_parts_pass_with_zero_counts():
    found = check_heldout(_data(), [("run-a", _task("What is 9 + 9?"))])
    assert found["test_and_training"] == {"run-a": 0} and found["validation_and_training"] == {"run-a": 0}


def test_the_report_counts_validation_overlap():
    from agon_env.evaluation.report import _disjoint

    found = check_heldout(_data(), [("run-a", POOL)], allow_overlap=True)
    assert _disjoint({"disjoint": found}).startswith("1 overlapping, allowed by --allow-overlap: test from ")
    assert "validation from each run's training pool" in _disjoint({"disjoint": found})
