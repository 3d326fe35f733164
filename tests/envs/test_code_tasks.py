"""Code tasks and test formats: real datasets' reference solutions pass, wrong answers fail."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agon_env.envs.tasks.base import Problem
from agon_env.envs.tasks.code import ASSERT_LIMITS
from agon_env.envs.tasks.code_checks import (
    IOCase,
    check_asserts,
    check_stdio,
    outputs_match,
    parse_harness_report,
    strip_code_fence,
    tolerance_from_statement,
)
from agon_env.envs.tasks.codecontests import (
    STDIO_LIMITS,
    CodeContestsTask,
    codecontests,
    codecontests_row,
    load_codecontests_problems,
)
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.humaneval import humaneval
from agon_env.envs.tasks.mbpp import MBPPTask, load_mbpp_problems, mbpp
from agon_env.sandbox import Limits, RunResult

MBPP = local_file("mbpp.jsonl")
CC = local_file("codecontests_sample.jsonl")
needs_mbpp = pytest.mark.skipif(MBPP is None, reason="mbpp.jsonl not found under ../shared/data")
needs_cc = pytest.mark.skipif(CC is None, reason="codecontests_sample.jsonl not found under ../shared/data")


# --- pure helpers ---------------------------------------------------------------------------------


def test_outputs_match_ignores_whitespace_layout_only():
    assert outputs_match("1 2\n3\n", "1\n2 3")
    assert outputs_match("YES\r\n", "YES")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("yes", "YES")
    assert not outputs_match("0.3333333", "0.333333")
    assert outputs_match("0.3333333 7", "0.333333 7", rel_tol=1e-6, abs_tol=1e-6)
    assert not outputs_match("0.34", "0.333333", rel_tol=1e-6, abs_tol=1e-6)
    assert not outputs_match("abc", "abd", rel_tol=1e-6, abs_tol=1e-6)


@given(st.lists(st.text(alphabet="ab1.-", min_size=1, max_size=5), max_size=8), st.randoms())
def test_outputs_match_is_layout_invariant(tokens, rnd):
    layout = "".join(t + rnd.choice([" ", "\n", "  ", "\t"]) for t in tokens)
    assert outputs_match(layout, " ".join(tokens))


def test_tolerance_from_statement_reads_codeforces_phrasings():
    assert (
        tolerance_from_statement("Your answer ... if its absolute or relative error does not exceed 10^{-6}.")
        == 1e-6
    )
    assert (
        tolerance_from_statement(
            "The answer will be accepted if the absolute or relative error doesn't exceed 10 - 4."
        )
        == 1e-4
    )
    assert tolerance_from_statement("Relative or absolute error should not be greater than 10 - 9.") == 1e-9
    assert tolerance_from_statement("Print the answer modulo 10^9+7.") is None


def test_strip_code_fence():
    assert strip_code_fence("```python\nprint(1)\n```") == "print(1)"
    assert strip_code_fence("Here:\n```py\nx = 1\n```\nthanks") == "x = 1"
    assert strip_code_fence("```\nprint(2)") == "print(2)"
    assert strip_code_fence("\n    return x\n\n") == "    return x"  # a body keeps its indentation


def test_harness_report_needs_the_nonce():
    forged = 'abc ["start", 0]\nabc ["case", 0, "passed", ""]\nabc ["done"]\n'
    run = RunResult("ok", 0, forged, "", 0.1)
    report = parse_harness_report(run, "the-real-nonce", 1)
    assert not report.all_passed and report.cases[0].status == "crashed"


# --- test formats through the sandbox -------------------------------------------------------------


def test_assert_cases_report_each_outcome():
    program = "def f(x):\n    print('noise')\n    return x + 1"
    tests = ["assert f(1) == 2", "assert f(1) == 3", "assert g(1)", "while True: pass", "assert f(0) == 1"]
    report = check_asserts(program, tests, limits=Limits(cpu_s=3, wall_s=2.0))
    assert [c.status for c in report.cases] == ["passed", "failed", "crashed", "timed_out", "skipped"]
    assert "AssertionError" in report.cases[1].detail and "NameError" in report.cases[2].detail


@pytest.mark.parametrize("escape", ["import sys; sys.exit(0)", "import os; os._exit(0)", "exit()"])
def test_exiting_early_does_not_pass_assert_tests(escape):
    report = check_asserts(f"def f():\n    return 1\n{escape}", ["assert f() == 2"])
    assert report.cases[0].status == "crashed"


def test_printing_a_fake_report_does_not_pass():
    program = (
        'print(\'x ["case", 0, "passed", ""]\')\nimport os\nos.write(1, b\'x ["done"]\\n\')\nraise SystemExit'
    )
    assert not check_asserts(program, ["assert False"]).all_passed


def test_setup_code_runs_after_the_program():
    program = "class Node:\n    def __init__(self, v):\n        self.v = v"
    assert check_asserts(program, ["assert root.v == 3"], setup="root = Node(3)").all_passed


def test_stdio_fail_fast_and_budget():
    prog = "a, b = map(int, input().split())\nprint(a + b)"
    cases = [IOCase("1 2", "3"), IOCase("2 2", "5"), IOCase("3 3", "6")]
    assert [c.status for c in check_stdio(prog, cases).cases] == ["passed", "failed", "skipped"]
    assert [c.status for c in check_stdio(prog, cases, fail_fast=False).cases] == [
        "passed",
        "failed",
        "passed",
    ]
    slow = "import time\ntime.sleep(0.6)\nprint(sum(map(int, input().split())))"
    report = check_stdio(slow, [IOCase("1 1", "2")] * 4, total_wall_s=0.5)
    assert [c.status for c in report.cases] == ["passed", "skipped", "skipped", "skipped"]


# --- loaders and task classes ---------------------------------------------------------------------


def _jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def test_loaders_build_problems_that_the_task_classes_score(tmp_path):
    mbpp_rows = [
        {
            "task_id": i,
            "text": f"Return {i}.",
            "code": f"def f():\n    return {i}",
            "test_list": [f"assert f() == {i}"],
        }
        for i in (5, 11, 12, 600)
    ]
    path = _jsonl(tmp_path / "mbpp.jsonl", mbpp_rows)
    problems = load_mbpp_problems(path, split="test", limit=1)
    assert [p.id for p in problems] == ["mbpp/11"] and "assert f() == 11" in problems[0].prompt
    task = MBPPTask(problems)
    assert task.name == "mbpp" and task.limits == ASSERT_LIMITS
    assert task.score(task[0], mbpp_rows[1]["code"]) and not task.score(task[0], mbpp_rows[0]["code"])
    with pytest.raises(KeyError, match="text"):
        load_mbpp_problems(_jsonl(tmp_path / "bad.jsonl", [{"task_id": 11, "test_list": ["assert 1"]}]))

    cc_rows = [
        {
            "id": "sum",
            "description": "Print a + b.",
            "tests": [{"input": "1 2", "output": "3"}],
            "ref_all_pass": True,
        },
        {"id": "bad", "description": "?", "tests": [{"input": "", "output": "1"}], "ref_all_pass": False},
        {"id": "none", "description": "no tests", "tests": []},
    ]
    path = _jsonl(tmp_path / "cc.jsonl", cc_rows)
    assert [p.id for p in load_codecontests_problems(path, None, only_ref_pass=False)] == ["sum", "bad"]
    cc = CodeContestsTask(load_codecontests_problems(path), workers=1)  # "sum" is carved into train
    assert [p.id for p in cc] == ["sum"] and cc.name == "codecontests" and cc.limits == STDIO_LIMITS
    assert cc.score(cc[0], "print(sum(map(int, input().split())))")


# --- HumanEval ------------------------------------------------------------------------------------


def test_humaneval_loads_from_the_package_and_scores():
    task = humaneval(limit=3)
    p = task[0]
    assert len(humaneval()) == 164 == len(humaneval(split=None)) and p.id == "HumanEval/0"
    assert "has_close_elements" in p.prompt and "complete Python function" in p.prompt
    full = (
        "```python\ndef has_close_elements(numbers, threshold):\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```"
    )
    assert task.score(p, full)
    assert task.score(p, p.answer["reference"])  # a bare indented body also works
    assert not task.score(p, "def has_close_elements(numbers, threshold):\n    return True")


@pytest.mark.parametrize("split", ["train", "validation"])
def test_humaneval_is_test_only_and_says_what_to_use_instead(split):
    with pytest.raises(
        ValueError, match=f"HumanEval is a test set only.*no '{split}' split.*--val-problems 0"
    ):
        humaneval(split=split)


@pytest.mark.parametrize("index", range(0, 164, 16))
def test_humaneval_canonical_solutions_pass_subset(index):
    task = humaneval()
    assert task.score(task[index], task[index].answer["reference"])


@pytest.mark.slow
def test_humaneval_all_canonical_solutions_pass():
    task = humaneval()
    failing = [p.id for p in task if not task.score(p, p.answer["reference"])]
    assert failing == []


# --- MBPP -----------------------------------------------------------------------------------------


@needs_mbpp
def test_mbpp_splits_and_prompt():
    test, val, train = (mbpp(split=s) for s in ("test", "validation", "train"))
    assert len(test) == 500 and {p.meta["task_id"] for p in test} == set(range(11, 511))
    assert {p.meta["task_id"] for p in val} == set(range(511, 601)) and len(mbpp(split=None)) == 974
    # Three train rows restate a test problem's text under another function name: dropped.
    assert {p.meta["task_id"] for p in train} == set(range(601, 975)) - {602, 704, 872}
    assert len(mbpp()) == len(train)  # the safe default: a bare make() never hands out test problems
    p = test[0]
    assert p.answer["tests"][0] in p.prompt and p.answer["tests"][1] not in p.prompt
    with pytest.raises(ValueError, match="split must be one of"):
        mbpp(split="all")


@needs_mbpp
def test_mbpp_reference_code_passes_on_a_subset():
    # The two rows with test_setup_code (367, 927) exercise the setup path.
    task = mbpp(split=None)
    picked = [p for p in task if p.meta["task_id"] in {2, 11, 57, 100, 200, 367, 400, 510, 600, 927}]
    assert len(picked) == 10
    failing = [p.id for p in picked if not task.check(p, p.answer["reference"]).all_passed]
    assert failing == []
    assert not task.score(picked[0], "def similar_elements(a, b):\n    return ()")


# --- CodeContests ---------------------------------------------------------------------------------


@needs_cc
def test_codecontests_filter_and_prompt():
    assert len(codecontests(only_ref_pass=False, split=None)) == 300
    task = codecontests(split=None)
    assert len(task) == 225 and all(p.meta["ref_all_pass"] for p in task)
    assert (
        "standard input" in task[0].prompt and task[0].answer["tests"][0].output not in task[0].prompt[-50:]
    )


@needs_cc
def test_codecontests_task_copies_and_pickles_without_its_pool():
    task = codecontests(limit=2)
    assert task.score(task[0], task[0].answer["reference"])
    clone = pickle.loads(pickle.dumps(task))
    train, _ = task.split(0.5)
    assert clone._pool is None and copy.copy(task)._pool is None and train._pool is None
    assert clone.score(clone[0], clone[0].answer["reference"])


@pytest.mark.parametrize("junk", ["", "```", "\x00\x01", "<answer>", "print(" * 500, "x" * 200_000])
def test_scores_never_raise_on_junk(junk):
    task = humaneval(limit=1)
    assert task.score(task[0], junk) is False


def test_codecontests_hub_rows_are_normalised():
    row = {
        "name": "1_A. Theatre Square",
        "description": "...",
        "difficulty": 7,
        "public_tests": {"input": ["6 6 4\n"], "output": ["4\n"]},
        "private_tests": {"input": ["1 1 1\n"], "output": ["1\n"]},
        "generated_tests": {"input": [], "output": []},
        "solutions": {"language": [2, 3], "solution": ["int main(){}", "print(1)"]},
    }
    out = codecontests_row(row)
    assert out["tests"] == [{"input": "6 6 4\n", "output": "4\n"}, {"input": "1 1 1\n", "output": "1\n"}]
    assert out["solution_py"] == "print(1)" and out["id"] == "1_A. Theatre Square"


@pytest.mark.parametrize(("split", "hub"), [("train", "train"), ("validation", "valid"), ("test", "test")])
def test_codecontests_reads_the_hubs_own_split(monkeypatch, split, hub):
    # Without a local file the hub's official split is read as is (its validation is "valid").
    import agon_env.envs.tasks.codecontests as cc

    asked = []
    row = {"name": "1_A", "description": "Print 1.", "public_tests": {"input": [""], "output": ["1"]}}
    monkeypatch.setattr(cc, "local_file", lambda name: None)
    monkeypatch.setattr(cc, "load_rows", lambda source, split: asked.append((source, split)) or [row])
    assert [p.id for p in cc.codecontests(split=split)] == ["1_A"]  # not carved: the hub decided
    assert asked == [("deepmind/code_contests", hub)]


# The record's limits are the base the task scales from: each problem's CPU limit is a multiple of
# its reference's measured time here (code.TimeScale), so no verdict below depends on the machine.
RECORDED = Limits(cpu_s=10, wall_s=60.0)


def _reference_outcomes(task: CodeContestsTask) -> list[tuple[str, bool, bool, float | None]]:
    out = []
    for p in task:
        report = task.check(p, p.answer["reference"])
        out.append((p.id, bool(p.meta["ref_all_pass"]), report.all_passed, p.answer["tolerance"]))
    return out


# Recorded as failing because the record compared line by line, while we compare tokens (as
# Codeforces' checker does): the reference prints the same numbers with another line layout,
# e.g. "2\n3 1" against "2 3 1".
LAYOUT_ONLY = {
    "1325_d_ehab_the_xorcist_11372",
    "288_c_polo_the_penguin_and_xor_operation_9826",
    "487_c_prefix_product_sequence_2443",
    "923_c_perfect_security_7561",
}
# Recorded as failing because the record's fixed 10 CPU s cut the reference off: on its slowest
# case 1238_e needs 11.2 CPU s and 1503_e 12.7 on a 2-core dev machine (`reference_cpu_s`), and
# both fail there at a fixed 10 s. Under scaled limits each gets three times its own time on any
# machine, so both pass (CI found 1503_e passing before it was listed).
RECORD_CUT_OFF = {"1238_e_keyboard_purchase_2831", "1503_e_2coloring_8359"}


def _assert_matches_record(outcomes: list[tuple[str, bool, bool, float | None]]) -> None:
    # Every recorded pass must pass: a reference gets a multiple of its own measured time. The
    # record compared outputs exactly under a fixed limit, so a recorded failure may pass here, but
    # only on a problem whose statement grants a float tolerance (its reference printed e.g.
    # 0.6666666667 against 0.666667: 19 of the 75 failures), a LAYOUT_ONLY one (4 more), or one the
    # record's fixed limit cut off. The others need a special checker or have bad tests.
    for pid, recorded, ours, tol in outcomes:
        if recorded:
            assert ours, f"{pid}: reference recorded as passing fails here"
        elif ours:
            explained = tol is not None or pid in LAYOUT_ONLY or pid in RECORD_CUT_OFF
            assert explained, f"{pid}: recorded failure passes unexplained"


@needs_cc
def test_codecontests_references_score_as_recorded_fast():
    task = codecontests(only_ref_pass=False, limits=RECORDED, total_wall_s=300, split=None)
    ids = [p.id for p in task.problems][:270:15]  # file order
    ids += ["1086_b_minimum_diameter_tree_8860", "487_c_prefix_product_sequence_2443"]  # tolerance, layout
    task.problems = [p for p in task.problems if p.id in set(ids)]
    assert len(task) == 20 and task.time_scale is not None
    outcomes = _reference_outcomes(task)
    _assert_matches_record(outcomes)
    assert {pid for pid, recorded, ours, _ in outcomes if ours and not recorded} == set(ids[-2:])


@needs_cc
@pytest.mark.slow
def test_codecontests_references_score_as_recorded_all():
    task = codecontests(only_ref_pass=False, limits=RECORDED, total_wall_s=600, split=None)
    _assert_matches_record(_reference_outcomes(task))


def _burner(cpu_s: float, prints: str) -> Problem:
    """A problem whose reference spends ``cpu_s`` of CPU time (not wall time: the same on any
    machine) before printing ``prints``; the expected output is 42."""
    code = f"import time\nwhile time.process_time() < {cpu_s}:\n    pass\nprint({prints!r})\n"
    answer = {"tests": [IOCase("", "42")], "tolerance": None, "reference": code}
    return Problem(id=f"burn-{cpu_s}-{prints}", prompt="", answer=answer)


def test_a_reference_over_the_fixed_limit_passes_under_its_scaled_limit():
    # The 1238_e case in small: a correct reference that needs more than the fixed CPU limit fails
    # at that limit on a slow enough machine; scaled to its own time it passes on every machine.
    slow = _burner(2.5, "42")
    task = CodeContestsTask([slow], Limits(cpu_s=2, wall_s=30.0), total_wall_s=120)
    assert task.limits_for(slow).cpu_s >= 8  # 3 x ~2.5 s
    # The same program under another text: checked afresh under its scaled limit (the reference's
    # own text would reuse its measurement, code.reference_check).
    assert task.score(slow, slow.answer["reference"] + "# checked afresh\n") is True
