"""Verdicts: a score() that cannot judge is counted and shown, never trained on as a wrong answer."""

from __future__ import annotations

import numpy as np
import pytest

import agon_env
from agon_env.agents import ScriptedAgent
from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.metrics import rollout_metrics
from agon_env.algorithms.rollout import ScoringWatch, TaskScoreError, rollout
from agon_env.envs.scoring import as_verdict, failure_of
from agon_env.envs.tasks import code_checks
from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.envs.tasks.errors import VerifierError
from agon_env.envs.tasks.math import MathTask
from agon_env.envs.tasks.mbpp import MBPPTask
from agon_env.metric_names import SCORE_ERRORS, SCORE_TIMEOUTS
from agon_env.sandbox import Limits, RunResult

SYMBOLIC = "Thinking. <summary>I expanded it.</summary> <answer>1+x^2</answer>"
"""An answer that only math-verify can judge (not a plain number or string match)."""


def fmt(answer: str) -> str:
    return f"Thinking. <summary>I did it.</summary> <answer>{answer}</answer>"


def _math(name: str, timeout: float = 5.0) -> MathTask:
    return MathTask([Problem("p0", "Expand (x^2 + 1).", "x^2+1")], name=name, verify_timeout=timeout)


def _solo_batch(task, text: str):
    env = agon_env.make("agon/math-v0", task=task, mode="solo")
    return rollout(env, {"agent_a": ScriptedAgent("a", [text])}, [0], 2, drafter="agent_a")


class _Returns(ListTask):
    def __init__(self, value) -> None:
        super().__init__([Problem("p0", "What is 1 + 1?", "2")], name=f"returns-{value!r}")
        self.value = value

    def score(self, problem, answer):
        return self.value


class _Raises(ListTask):
    name = "raises-a-percent-in-scoring-test"

    def score(self, problem, answer):
        raise ValueError("100% wrong")


@pytest.mark.parametrize(
    "value,verdict",
    [(True, True), (False, False), (1, True), (0, False), (np.bool_(True), True), (np.int64(0), False)]
    + [(v, None) for v in ("no", "yes", "", None, 2, 0.5, 1.0, [True])],
)
def test_only_bools_and_0_1_are_verdicts(value, verdict):
    assert as_verdict(value) is verdict


@pytest.mark.parametrize("value", ["no", "False", 2, None])
def test_a_score_that_returns_a_non_bool_is_a_scoring_error_not_a_reward(value):
    batch = _solo_batch(_Returns(value), fmt("2"))
    turn = batch.turns[0]
    assert not turn.correct and turn.reward == 0.5  # format only: bool("no") would have paid 2
    assert "not a bool" in turn.score_error and repr(value)[:20] in turn.score_error
    assert rollout_metrics(batch)[SCORE_ERRORS] == 2


def test_a_score_error_with_a_percent_sign_scores_0_and_is_shown():
    env = agon_env.make("agon/math-v0", task=_Raises([Problem("p0", "What is 1 + 1?", "2")]), mode="solo")
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="100% wrong"):
        env.step(fmt("2"))  # the traceback used to be a %-format string: TypeError
    (turn,) = env.results
    assert not turn.correct and "ValueError: 100% wrong" in turn.score_error


def test_a_raising_math_verifier_reaches_score_error_and_score_errors(fake_math_verify):
    fake_math_verify("raises")
    task = _math("math-verifier-raises")
    batch = _solo_batch(task, SYMBOLIC)
    for turn in batch.turns:
        assert not turn.correct and not turn.score_timeout
        assert "VerifierError" in turn.score_error and "fake verifier failure at 100%" in turn.score_error
    m = rollout_metrics(batch)
    assert m[SCORE_ERRORS] == 2 and m[SCORE_TIMEOUTS] == 0
    assert batch.episodes[0].to_dict()["turns"][0]["score_error"] is True
    with pytest.raises(TaskScoreError, match="fake verifier failure"):  # every answer failed: stop
        ScoringWatch(task).check(batch, 0, DistContext())


def test_a_math_verifier_timeout_is_counted_apart_from_errors_and_wrong_answers(fake_math_verify):
    fake_math_verify("hangs")
    env = agon_env.make("agon/math-v0", task=_math("math-verifier-hangs", timeout=1.0), mode="solo")
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="timed out"):
        env.step(SYMBOLIC)
    (turn,) = env.results
    assert not turn.correct and turn.score_timeout and turn.score_error is None
    info = env.infos["agent_a"]
    assert info["score_timeout"] is True and info["score_error"] is False


def test_timeouts_and_errors_are_metrics_of_a_step(fake_math_verify):
    fake_math_verify("hangs")
    m = rollout_metrics(_solo_batch(_math("math-verifier-hangs-metrics", timeout=1.0), SYMBOLIC))
    assert m[SCORE_TIMEOUTS] == 2 and m[SCORE_ERRORS] == 0


def test_a_working_verifier_counts_nothing():
    batch = _solo_batch(_math("math-verifier-works"), SYMBOLIC)
    assert all(t.correct for t in batch.turns)
    m = rollout_metrics(batch)
    assert m[SCORE_ERRORS] == 0 and m[SCORE_TIMEOUTS] == 0


def _mbpp(**kw) -> MBPPTask:
    bundle = {"setup": "", "tests": ["assert f(1) == 2"], "reference": "def f(x):\n    return x + 1"}
    return MBPPTask([Problem("mbpp/x", "Write f.", bundle, {})], **kw)


def test_a_code_sandbox_that_cannot_start_is_a_score_error(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("/usr/bin/python3 is missing: the sandbox needs a system Python")

    monkeypatch.setattr(code_checks, "run_python", missing)
    task = _mbpp()
    with pytest.raises(VerifierError, match="could not run"):
        task.score(task[0], "def f(x):\n    return x + 1")
    batch = _solo_batch(task, fmt("def f(x):\n    return x + 1"))
    assert all("FileNotFoundError" in t.score_error for t in batch.turns)
    assert rollout_metrics(batch)[SCORE_ERRORS] == 2


def test_bwrap_failing_to_start_the_program_is_a_score_error(monkeypatch):
    bwrap = "bwrap: Creating new namespace failed: Operation not permitted\n"
    monkeypatch.setattr(code_checks, "run_python", lambda *a, **k: RunResult("error", 1, "", bwrap, 0.01))
    task = _mbpp()
    with pytest.raises(VerifierError, match=r"sandbox could not start the program.*Creating new namespace"):
        task.score(task[0], "def f(x):\n    return x + 1")
    crash = RunResult("error", 1, "", "Traceback ...\nNameError: name 'g' is not defined\n", 0.1)
    assert code_checks.sandbox_failure(crash) is None  # the program's own crash is a wrong answer
    assert code_checks.judge_io(crash, code_checks.IOCase("", "1")).status == "crashed"


def test_model_code_that_times_out_in_the_sandbox_is_a_counted_time_out():
    # Reward 0 as before, but counted in score_timeouts (issue #41), never silently as wrong.
    task = _mbpp(limits=Limits(cpu_s=1, wall_s=4.0))
    batch = _solo_batch(task, fmt("def f(x):\n    while True:\n        pass"))
    turn = batch.turns[0]
    assert not turn.correct and turn.score_error is None and turn.score_timeout


def test_a_launcher_failure_is_believed_only_when_a_canary_fails_too(monkeypatch):
    # Model code can write a launcher's words to stderr and exit 1 itself.
    looks_like_bwrap = RunResult("error", 1, "", "bwrap: Creating new namespace failed\n", 0.01)
    assert code_checks.sandbox_failure(looks_like_bwrap) is None  # the real sandbox runs a canary fine
    monkeypatch.setattr(code_checks, "run_python", lambda *a, **k: looks_like_bwrap)
    assert code_checks.sandbox_failure(looks_like_bwrap).startswith("bwrap: Creating")


def test_a_score_that_returns_nan_is_reported_as_returning_it_not_as_raising():
    # Issue 58: a NaN was first reported as "score() raised (or returned a non-bool)", then the run
    # stopped with "score() raised on all 2 answers", though nothing was raised.
    task = _Returns(float("nan"))
    env = agon_env.make("agon/math-v0", task=task, mode="solo")
    env.reset(seed=0)
    with pytest.warns(UserWarning) as caught:
        env.step(fmt("2"))
    shown = " ".join(str(w.message) for w in caught)
    assert "score() returned nan (float) instead of a bool; the turn scores 0." in shown
    assert "raised" not in shown
    batch = _solo_batch(task, fmt("2"))
    with pytest.raises(
        TaskScoreError, match=r"score\(\) returned nan \(float\) instead of a bool on all 2 answers"
    ):
        ScoringWatch(task).check(batch, 0, DistContext())


def test_a_raising_score_is_still_reported_as_raised():
    assert failure_of("Traceback (most recent call last):\n  ...\nValueError: 100% wrong") == "raised"
    assert failure_of("score() returned 'no' (str), not a bool") == "returned 'no' (str) instead of a bool"
