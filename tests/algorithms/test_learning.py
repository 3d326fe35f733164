"""A run that is not learning says so, in the user's terms, and can stop there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from algo_helpers import TINY_CLI as TINY
from algo_helpers import agon


def _step(dropped: float, fmt: float = 0.0, acc: float = 0.0, loss: float | None = None) -> dict:
    record = {
        "groups_dropped": dropped,
        "groups_dropped/drafter": dropped,
        "groups_dropped/challenger": dropped,
        "format/drafter": fmt,
        "format/challenger": fmt,
        "format/agent_a/drafter": fmt,
        "format/agent_b/challenger": fmt,
        "acc/drafter": acc,
        "acc/challenger": acc,
    }
    if loss is not None:
        record["loss/agent_a"] = loss
    return record


def test_the_watch_warns_once_after_k_idle_steps_in_a_row() -> None:
    from agon_env.algorithms.learning import LearningWatch

    watch = LearningWatch(after=3, batch_problems=4)
    assert [watch.update(_step(1.0)) for _ in range(2)] == [None, None]
    assert watch.update(_step(0.5, fmt=0.5, loss=0.1)) is None  # an update: the count starts again
    said = [watch.update(_step(1.0)) for _ in range(4)]
    assert said[:2] == [None, None] and said[3] is None
    assert said[2] == watch.warning
    assert said[2].startswith(
        "not learning: no completion of agent_a or agent_b wrote the answer format "
        "(a <summary> then an <answer> block) in 3 steps: 0 of 24 groups had reward variance, "
        "so no adapter was updated"
    )
    assert LearningWatch(after=0, batch_problems=4).update(_step(1.0)) is None  # 0: never


@pytest.mark.parametrize(
    ("step", "said"),
    [
        (_step(1.0, fmt=1.0, acc=0.0), "no completion was right in 2 steps"),
        (_step(1.0, fmt=1.0, acc=1.0), "every completion was right in 2 steps"),
        (_step(1.0, fmt=0.5, acc=0.5), "every completion of a problem earned the same reward"),
        (_step(0.5, fmt=0.5, acc=0.5), "skipped for a non-finite loss or gradient (4 of 8 groups"),
    ],
)
def test_the_reason_is_what_the_completions_did(step: dict, said: str) -> None:
    from agon_env.algorithms.learning import idle_reason, updated

    assert not updated(step)
    assert said in idle_reason([step, step], batch_problems=2)


def test_agon_train_says_it_is_not_learning_and_stops(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = agon(
        "train",
        *TINY,
        "--steps",
        "4",
        "--not-learning-steps",
        "2",
        "--stop-if-not-learning",
        "--out-dir",
        str(run),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # the tiny random model never writes the answer format: every group is dropped
    assert (
        "agon train: WARNING after step 2: not learning: no completion of agent_a or agent_b wrote"
        in r.stderr
    )
    assert "agon train: stopping at step 2/4: not learning" in r.stdout
    assert "WARNING: not learning" in r.stdout  # under the summary table
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 2
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["groups_dropped"] == 1.0
    events = b"".join(p.read_bytes() for p in (run / "tb").iterdir())
    assert b"not learning: no completion" in events  # TensorBoard's text tab


def test_the_advice_fits_the_cause() -> None:
    from agon_env.algorithms.learning import idle_reason

    right = idle_reason([_step(1.0, fmt=1.0, acc=1.0)] * 2, batch_problems=2)
    assert "every completion was right" in right and "easier" not in right and "harder task" in right
    unjudged = {**_step(1.0, fmt=1.0), "score_timeouts": 4.0}
    for k in ("acc/drafter", "acc/challenger"):
        del unjudged[k]  # accuracy leaves unjudged answers out: none was judged
    said = idle_reason([unjudged] * 2, batch_problems=2)
    assert "judged no answer (8 errors or time-outs)" in said and "easier" not in said
    assert "fix the task's scorer" in said


def test_a_short_run_that_updates_nothing_says_so_at_its_end(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = agon("train", *TINY, "--steps", "2", "--out-dir", str(run))  # not_learning_steps: 5
    assert r.returncode == 0, r.stderr[-3000:]
    assert "agon train: no update in the whole run: no completion of agent_a or agent_b wrote" in r.stdout
    assert "try the worked examples" in r.stdout


def test_unjudged_answers_are_left_out_of_accuracy() -> None:
    import agon_env
    from agon_env.agents import ScriptedAgent
    from agon_env.algorithms.metrics import rollout_metrics
    from agon_env.algorithms.rollout import rollout
    from agon_env.envs.tasks.base import ListTask, Problem

    class HalfRaises(ListTask):
        name = "half-raises"

        def score(self, problem: Problem, answer: str) -> bool:
            if answer == "boom":
                raise ValueError("cannot judge")
            return answer == problem.answer

    task = HalfRaises([Problem("p0", "What is 1 + 1?", "2")])
    env = agon_env.make("agon/math-v0", task=task, mode="solo")
    texts = [f"x <summary>s</summary><answer>{a}</answer>" for a in ("2", "boom")]
    with pytest.warns(UserWarning, match="cannot judge"):
        m = rollout_metrics(rollout(env, {"agent_a": ScriptedAgent("a", texts)}, [0], 2, drafter="agent_a"))
    assert m["score_errors"] == 1 and m["acc/drafter"] == 1.0  # 1 right of 1 judged, not 1 of 2
