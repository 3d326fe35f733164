"""Code time limits scale with a reference's measured CPU time; a time-out is counted, not called wrong."""

from __future__ import annotations

import pytest

import agon_env
from agon_env.envs.tasks.base import Problem
from agon_env.envs.tasks.code_checks import IOCase
from agon_env.sandbox import Limits


def _burn(seconds: float, then: str = "return 1") -> str:
    """A function ``f`` that spends ``seconds`` of CPU time (not wall time: the same on any machine)."""
    return f"import time\ndef f():\n    while time.process_time() < {seconds}:\n        pass\n    {then}\n"


def _assert_problem(reference: str | None) -> Problem:
    answer = {"setup": "", "tests": ["assert f() == 1"], "reference": reference}
    return Problem(id=f"burn-{reference is not None}", prompt="Write f.", answer=answer)


def test_scaled_limits_are_a_multiple_of_the_reference_with_a_floor():
    from agon_env.envs.tasks.code import ASSERT_LIMITS, TimeScale

    scale = TimeScale(multiple=3.0, floor_cpu_s=2, wall_per_cpu=2.0, wall_slack_s=5.0)
    assert scale.limits(ASSERT_LIMITS, 0.1) == Limits(cpu_s=2, wall_s=9.0)  # 0.3 s: the floor
    assert scale.limits(ASSERT_LIMITS, 1.5) == Limits(cpu_s=5, wall_s=15.0)  # ceil(4.5)
    assert scale.limits(ASSERT_LIMITS, 9.0) == Limits(cpu_s=27, wall_s=59.0)  # 1238_e's ~9 s
    assert scale.limits(Limits(memory_bytes=1 << 30), 0.0).memory_bytes == 1 << 30  # only time changes


def test_the_sandbox_reports_a_runs_cpu_time():
    from agon_env.sandbox import run_python

    run = run_python(
        "import time\nwhile time.process_time() < 0.6:\n    pass\n", "", Limits(cpu_s=5, wall_s=60)
    )
    assert run.status == "ok" and 0.55 <= run.cpu_s < 2.0
    # The assert judge reaps the program's process, so its CPU time counts in the run's.
    from agon_env.envs.tasks.code_checks import check_asserts

    report = check_asserts(_burn(0.6), ["assert f() == 1"], limits=Limits(cpu_s=5, wall_s=60))
    assert report.all_passed and 0.55 <= report.cpu_s < 2.0


def test_a_program_over_its_limit_is_a_score_timeout_not_a_wrong_answer():
    # Through the env: the turn scores 0, and its info and results count a time-out.
    from agon_env.envs.tasks.mbpp import MBPPTask

    task = MBPPTask([_assert_problem("def f():\n    return 1\n")])
    env = agon_env.make("agon/math-v0", task=task, mode="solo")
    env.reset(seed=0)
    hang = "```python\ndef f():\n    while True:\n        pass\n```"
    with pytest.warns(UserWarning, match="timed out"):
        env.step(f"Loop. <summary>Loop.</summary> <answer>{hang}</answer>")
    (turn,) = env.unwrapped.results
    assert turn.score_timeout and turn.score_error is None and not turn.correct
    assert env.unwrapped.infos["agent_a"]["score_timeout"] is True
    env.reset(seed=0)  # a wrong answer: the same reward, and no time-out counted
    env.step("Wrong. <summary>Wrong.</summary> <answer>def f():\n    return 2</answer>")
    (wrong,) = env.unwrapped.results
    assert not wrong.score_timeout and not wrong.correct and wrong.reward == turn.reward
    assert task.limits_for(task[0]).cpu_s == 2  # a one-line reference: the floor


def test_a_wrong_case_stays_wrong_even_when_another_times_out():
    from agon_env.envs.tasks.errors import VerifierTimeout
    from agon_env.envs.tasks.mbpp import MBPPTask

    problem = Problem(
        "two",
        "Write f.",
        {
            "setup": "",
            "tests": ["assert f(1) == 1", "assert f(2) == 2"],
            "reference": "def f(x):\n    return x\n",
        },
    )
    task = MBPPTask([problem])
    wrong_then_hang = "def f(x):\n    while x == 2:\n        pass\n    return 0\n"
    assert task.score(problem, wrong_then_hang) is False
    right_then_hang = "def f(x):\n    while x == 2:\n        pass\n    return x\n"
    with pytest.raises(VerifierTimeout, match="over its time limit"):
        task.score(problem, right_then_hang)


def test_limits_follow_the_reference_measured_once(monkeypatch):
    from agon_env.envs.tasks import code
    from agon_env.envs.tasks.errors import VerifierTimeout
    from agon_env.envs.tasks.mbpp import MBPPTask

    scale = code.TimeScale(multiple=3.0, floor_cpu_s=1)
    problem = _assert_problem(_burn(0.5))
    task = MBPPTask([problem], time_scale=scale)
    measured = []
    real = task.run_checks
    monkeypatch.setattr(task, "run_checks", lambda *a, **k: measured.append(k) or real(*a, **k))
    limits = task.limits_for(problem)
    assert 0.45 <= code.reference_cpu_s(task, problem) < 1.5
    assert limits.cpu_s == max(1, -(-3 * code.reference_cpu_s(task, problem) // 1)) >= 2
    assert task.score(problem, _burn(0.5)) is True  # as slow as the reference: within 3x
    with pytest.raises(VerifierTimeout):
        task.score(problem, _burn(30.0))  # 60x the reference
    assert sum(bool(k.get("measuring")) for k in measured) == 1  # measured once, then cached


def test_a_problem_without_a_reference_keeps_the_fixed_limit_and_still_counts_time_outs():
    from agon_env.envs.tasks.errors import VerifierTimeout
    from agon_env.envs.tasks.mbpp import MBPPTask

    problem = _assert_problem(None)
    task = MBPPTask([problem], Limits(cpu_s=1, wall_s=10.0))
    assert task.limits_for(problem) == Limits(cpu_s=1, wall_s=10.0)
    with pytest.raises(VerifierTimeout):
        task.score(problem, _burn(30.0))


def test_a_stdin_program_over_its_limit_is_a_time_out():
    from agon_env.envs.tasks.codecontests import CodeContestsTask
    from agon_env.envs.tasks.errors import VerifierTimeout

    answer = {"tests": [IOCase("", "42")], "tolerance": None, "reference": "print(42)\n"}
    problem = Problem("cc-burn", "Print 42.", answer)
    task = CodeContestsTask([problem])
    assert task.limits_for(problem).cpu_s == 2
    assert task.score(problem, "print(42)") is True
    with pytest.raises(VerifierTimeout):
        task.score(problem, "while True:\n    pass\n")
    assert task.score(problem, "print(41)") is False
    assert task.score_timeout > task.limits_for(problem).wall_s


def test_checking_the_reference_reuses_its_measurement(monkeypatch):
    # Scoring a dataset's references (its conformance tests) runs each once, not twice: the
    # measurement ran every case under a wider cap, so it is the reference's check.
    from agon_env.envs.tasks import code
    from agon_env.envs.tasks.mbpp import MBPPTask

    reference = _burn(0.2)
    problem = _assert_problem(reference)
    task = MBPPTask([problem], time_scale=code.TimeScale(multiple=3.0, floor_cpu_s=1))
    runs = []
    real = task.run_checks
    monkeypatch.setattr(task, "run_checks", lambda *a, **k: runs.append(a[1]) or real(*a, **k))
    report = task.check(problem, reference)
    assert report.all_passed and runs == [reference]  # the measuring run alone
    assert task.score(problem, reference) is True and runs == [reference]
    wrong = _burn(0.2, then="return 2")
    assert task.score(problem, wrong) is False and runs == [reference, wrong]  # other answers run
    assert real(problem, reference, task.limits_for(problem)).all_passed  # a fresh run agrees
