"""A score() that never returns: every caller gets its step back, and the hang is counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import agon_env
from agon_env.conformance import check_env
from agon_env.envs.tasks.arith import ArithTask
from agon_env.envs.tasks.base import ListTask, Problem

RELEASE = threading.Event()
"""Set at the end of the module: the abandoned scorer threads then end instead of sleeping on."""

RIGHT = "Thinking. <summary>I did it.</summary> <answer>2</answer>"


@pytest.fixture(autouse=True, scope="module")
def _release_threads() -> Iterator[None]:
    yield
    RELEASE.set()


class Hangs(ListTask):
    name = "hangs"
    score_timeout = 0.3

    def __init__(self) -> None:
        super().__init__([Problem(str(i), f"What is {i} + 2 - {i}?", "2") for i in range(3)])

    def score(self, problem: Problem, answer: str) -> bool:
        RELEASE.wait()  # a scorer stuck forever (until the module ends)
        return True


def returns_within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``'s result, failing (not hanging) the test when it takes longer than ``seconds``."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((call(), None))
        except BaseException as exc:  # re-raised in the test's thread
            box.append((None, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"still running after {seconds} s: the hang reached the caller"
    result, error = box[0]
    if error is not None:
        raise error
    return result


def test_env_step_returns_and_counts_a_score_that_never_returns() -> None:
    env = agon_env.make("agon/math-v0", task=Hangs(), mode="solo")
    env.reset(seed=0)

    def play() -> Any:
        start = time.perf_counter()
        with pytest.warns(UserWarning, match="did not return within its wall-clock limit"):
            env.step(RIGHT)
        return time.perf_counter() - start

    took = returns_within(30, play)
    assert took < 5
    (turn,) = env.unwrapped.results
    assert turn.score_timeout and turn.score_error is None and not turn.correct
    assert env.unwrapped.infos["agent_a"]["score_timeout"] is True


def test_check_env_returns_and_names_the_timeout() -> None:
    def check() -> str:
        with pytest.raises(AssertionError) as exc:
            check_env(lambda: agon_env.make("agon/math-v0", task=Hangs()), num_cycles=2, seed_cycles=2)
        return str(exc.value)

    message = returns_within(60, check)
    assert "gave no verdict within 0.3 s" in message and "score_timeout" in message


def test_check_env_waits_out_a_hanging_scorer_once() -> None:
    calls: list[str] = []

    class Counted(Hangs):
        def score(self, problem: Problem, answer: str) -> bool:
            calls.append(answer)
            return super().score(problem, answer)

    with pytest.raises(AssertionError, match=r"gave no verdict within 0\.3 s"):
        returns_within(60, lambda: check_env(lambda: agon_env.make("agon/math-v0", task=Counted())))
    assert len(calls) == 1  # PettingZoo's api_test and seed_test used to wait out 4 more limits first


def test_evaluation_returns_and_counts_the_timeouts() -> None:
    from agon_env.agents.protocol import Completion
    from agon_env.evaluation.evaluate import Evaluator
    from agon_env.evaluation.methods import Policies
    from agon_env.evaluation.splits import load_eval_data

    class HangingArith(ArithTask):
        score_timeout = 0.2

        def score(self, problem: Problem, answer: str) -> bool:
            RELEASE.wait()
            return True

    if "test/hanging-arith-v0" not in agon_env.registered_ids():
        agon_env.register("test/hanging-arith-v0", entry_point=HangingArith)
    data = load_eval_data("test/hanging-arith-v0", {}, problems=3, val_problems=0, seed=0)

    class Answers:  # the agents' protocol: a batch of observations in, one completion each out
        name = "a"

        def act(self, observations: Any, *, seeds: Any = None) -> list[Completion]:
            return [Completion(text=RIGHT, completion_ids=[1, 2], agent=self.name) for _ in observations]

    agent = Answers()
    evaluator = Evaluator(data, seeds=[0], methods=["standalone"])
    policies = Policies(label="run", base=None, adapters={"agent_a": agent})
    with pytest.warns(UserWarning, match="wall-clock limit"):
        result = returns_within(60, lambda: evaluator.evaluate(policies))
    method = result["methods"]["standalone:agent_a"]
    # unjudged, not wrong: out of pass@1's counts, counted beside (86f3fbc: a pass@1 of 0 of 3)
    assert method["score_timeouts"] == 3 and method["pass@1"]["rate"] is None
    assert (method["pass@1"]["trials"], method["pass@1"]["unjudged"]) == (0, 3)


def test_the_limit_is_the_tasks_setting_with_a_documented_default() -> None:
    from agon_env.envs.scoring import SCORE_TIMEOUT_S, score_answer, score_limit

    class Plain(ListTask):
        def score(self, problem: Problem, answer: str) -> bool:
            return threading.current_thread() is threading.main_thread()

    task = Plain([Problem("0", "q", "a")])
    assert score_limit(task) == SCORE_TIMEOUT_S
    assert score_answer(task, task[0], "a").correct is False  # scored in a worker thread
    task.score_timeout = None  # e.g. a scorer with its own signal.alarm: the caller's thread, no limit
    assert score_limit(task) is None and score_answer(task, task[0], "a").correct is True
    task.score_timeout = -1
    with pytest.raises(ValueError, match="score_timeout = -1; use seconds > 0, or None"):
        agon_env.make("agon/math-v0", task=task)
