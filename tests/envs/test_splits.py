"""Held-out splits are disjoint by content for every task with splits."""

from __future__ import annotations

import json

import pytest

from agon_env.envs.tasks.arith import ArithTask, distinct_problems, rearranged
from agon_env.envs.tasks.base import SPLITS, content_split, normalize_prompt
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.math import deepmath, gsm8k, math_task


def prompts(task, n=None):
    return {normalize_prompt(task[i].prompt) for i in range(min(len(task), n or len(task)))}


def assert_pairwise_disjoint(by_split):
    for a in SPLITS:
        for b in SPLITS:
            if a < b:
                assert not by_split[a] & by_split[b], (a, b, sorted(by_split[a] & by_split[b])[:3])


@pytest.mark.parametrize("level", [1, 2, 2.5, 3, 4, 5])
def test_arith_splits_partition_the_expression_space(level):
    by_split = {s: prompts(ArithTask(level, size=1500, split=s)) for s in SPLITS}
    assert_pairwise_disjoint(by_split)
    assert all(content_split(p) == s for s, ps in by_split.items() for p in ps)
    if level <= 2:  # small levels: every distinct problem of the split shows up
        assert {s: len(ps) for s, ps in by_split.items()} == {s: distinct_problems(level, s) for s in SPLITS}


@pytest.mark.parametrize("level", [1, 2])
def test_arith_counts_held_out_expressions_whose_swap_is_trained(level):
    # Issue 58: not a trained function (every split has every operator) but a held-out answer trained
    # under another order; counted, not moved (docs/envs.md). At levels 1-2 a twin is exactly the swap.
    ops = "+" if level == 1 else "+−×"
    exprs = [f"{a} {o} {b}" for a in range(10) for o in ops for b in range(10)]
    for split in ("validation", "test"):
        swapped = sum(
            content_split(f"What is {e}?") == split
            and e.split()[1] in "+×"
            and e.split()[0] != e.split()[2]
            and content_split(f"What is {e.split()[2]} {e.split()[1]} {e.split()[0]}?") == "train"
            for e in exprs
        )
        assert rearranged(level, split) == swapped > 0
    assert rearranged(level, "train") == 0 and rearranged(2.5, "test") == 0  # b op a is not a 2.5 shape


def test_normalised_prompts_decide_the_split():
    assert content_split("What is 3 + 4?") == content_split("  what is 3  +  4? ")
    assert normalize_prompt("A\n b") == "a b"


def test_deepmath_carves_validation_and_test_from_its_one_split(tmp_path):
    rows = [
        {"question": f"Find x if x^{i} = {i}.", "final_answer": str(i), "difficulty": 8 + i % 2}
        for i in range(60)
    ]
    rows += [{"question": "Is 7 prime?", "final_answer": "yes", "difficulty": 9}]  # dropped as binary
    rows += [{"question": "Easy one?", "final_answer": "1", "difficulty": 3}]  # dropped as easy
    path = tmp_path / "deepmath.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    by_split = {s: prompts(deepmath(path=str(path), split=s)) for s in SPLITS}
    assert_pairwise_disjoint(by_split)
    assert sum(len(v) for v in by_split.values()) == 60
    assert min(len(v) for v in by_split.values()) > 0


def test_math_file_is_carved_and_none_keeps_everything(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": str(i)}) + "\n" for i in range(40)))
    by_split = {s: prompts(math_task(path=str(path), split=s)) for s in SPLITS}
    assert_pairwise_disjoint(by_split)
    assert len(math_task(path=str(path))) == 40 == sum(len(v) for v in by_split.values())
    with pytest.raises(ValueError, match="split must be one of"):
        math_task(path=str(path), split="dev")


@pytest.mark.skipif(local_file("gsm8k_train.jsonl") is None, reason="needs ../shared/data")
def test_gsm8k_keeps_its_test_split_and_carves_validation_from_train():
    by_split = {s: prompts(gsm8k(split=s)) for s in SPLITS}
    assert_pairwise_disjoint(by_split)
    assert len(by_split["test"]) == 1319
    assert all(content_split(p) == "validation" for p in by_split["validation"])


def test_level_2_5_sits_between_2_and_3():
    p = ArithTask(2.5, split="test")[0]
    a, op, b = p.meta["expression"].split()
    assert 10 <= int(a) <= 99 and 0 <= int(b) <= 9 and op in "+−×"
    assert ArithTask(2.5).name == "arith-d2.5" and ArithTask(3.0).difficulty == 3
    # Integer levels keep their problems (seed keys unchanged by the new level).
    assert ArithTask(3, split="test")[5].prompt == ArithTask(3.0, split="test")[5].prompt
    with pytest.raises(ValueError, match=r"one of 1, 2, 2\.5"):
        ArithTask(2.7)


CODE_DATA = {"agon/mbpp-v0": "mbpp.jsonl", "agon/codecontests-v0": "codecontests_sample.jsonl"}


@pytest.mark.parametrize("env_id", sorted(CODE_DATA))
def test_code_envs_have_non_empty_content_disjoint_splits(env_id):
    import agon_env

    if local_file(CODE_DATA[env_id]) is None:
        pytest.skip(f"{CODE_DATA[env_id]} not found under ../shared/data")
    tasks = {s: agon_env.make(env_id, split=s).task for s in SPLITS}
    by_split = {s: prompts(t) for s, t in tasks.items()}
    assert min(len(v) for v in by_split.values()) > 0, {s: len(v) for s, v in by_split.items()}
    assert_pairwise_disjoint(by_split)
    ids = {s: {p.id for p in t} for s, t in tasks.items()}
    assert_pairwise_disjoint(ids)
    assert prompts(agon_env.make(env_id).task) == by_split["train"]  # a bare make() trains on train


def test_codecontests_file_is_carved_by_content_with_duplicates_together(tmp_path):
    from agon_env.envs.tasks.codecontests import codecontests

    # The same statement under two ids (Codeforces' div. 1 and div. 2 rounds) must land in one split.
    rows = [
        {"id": f"p{i}", "description": f"Print {i // 2} plus one.", "tests": [{"input": "", "output": "1"}]}
        for i in range(60)
    ]
    path = tmp_path / "cc.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = {s: codecontests(path=str(path), split=s, workers=1) for s in SPLITS}
    assert_pairwise_disjoint({s: prompts(t) for s, t in tasks.items()})
    assert sum(len(t) for t in tasks.values()) == 60 and min(len(t) for t in tasks.values()) > 0
    assert all(content_split(p.prompt) == s for s, t in tasks.items() for p in t)
    assert [p.id for p in codecontests(path=str(path), split="test", limit=2)] == [
        p.id for p in tasks["test"]
    ][:2]


def test_mbpp_fixture_keeps_the_upstream_id_ranges(tmp_path):
    from agon_env.envs.tasks.fixtures import MBPP_FIXTURE_IDS, write_mbpp_fixture
    from agon_env.envs.tasks.mbpp import mbpp

    path = str(write_mbpp_fixture(tmp_path / "mbpp.jsonl"))
    for split, ids in MBPP_FIXTURE_IDS.items():
        assert [p.meta["task_id"] for p in mbpp(path=path, split=split)] == list(ids)


class _OneList:
    """A user task with no ``split=``: one list of problems."""

    name = "one-list"

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int):
        from agon_env.envs.tasks.base import Problem

        return Problem(str(i), f"What is {i} + 1?", str(i + 1))

    def score(self, problem, answer) -> bool:
        return answer.strip() == problem.answer


def test_a_task_without_splits_is_told_what_to_provide_not_to_pass_split_test() -> None:
    import agon_env
    from agon_env.evaluation.splits import OverlapError, check_heldout, load_eval_data, overlap_count
    from agon_env.registry import _REGISTRY

    agon_env.register("test/one-list-v0", entry_point=_OneList)
    try:
        data = load_eval_data("test/one-list-v0", {}, "test", problems=4, val_problems=2)
        pool = [("run", _OneList())]
        with pytest.raises(OverlapError) as err:
            check_heldout(data, pool)
        assert "--split test" not in str(err.value)
        assert "takes no split=" in str(err.value) and "give its constructor a split= argument" in str(
            err.value
        )
        found = check_heldout(data, pool, allow_overlap=True)
        assert overlap_count(found) == 4 + 2  # every test and validation prompt is a training prompt
    finally:
        _REGISTRY.pop("test/one-list-v0")


def test_a_report_with_allowed_overlap_never_claims_disjoint() -> None:
    from agon_env.evaluation.report import _disjoint

    check = {
        "how": "text",
        "test_and_validation": 0,
        "test_and_training": {"r": 3},
        "validation_and_training": {},
    }
    line = _disjoint({"disjoint": check})
    assert "disjoint:" not in line and line.startswith("3 overlapping, allowed by --allow-overlap")
