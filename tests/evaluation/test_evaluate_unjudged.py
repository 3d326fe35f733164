"""``eval.json`` leaves an answer the verifier never judged out of pass@1, pass@k and the
conversion rate, and stores its outcome as null (issue 58, item 2; 86f3fbc scored it 0)."""

from __future__ import annotations

import warnings

import agon_env
from agon_env.agents import ScriptedAgent
from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.episodes import Start, play_episodes
from agon_env.evaluation.evaluate import outcomes, summarize


class RaisesOnBoom(ListTask):
    name = "raises-on-boom"

    def score(self, problem: Problem, answer: str) -> bool:
        if answer == "boom":
            raise ValueError("cannot judge")
        return answer == problem.answer


# problem -> (draft's answer, challenger's answer); every right answer is "2"
PLAY = {"Q0": ("boom", "2"), "Q1": ("3", "2"), "Q2": ("2", "2"), "Q3": ("3", "boom")}


def _says(turn: int):
    def complete(obs) -> str:
        answer = next(v[turn] for q, v in PLAY.items() if q in str(obs["problem"]))
        return f"x <summary>it is {answer}</summary><answer>{answer}</answer>"

    return complete


def test_eval_leaves_unjudged_answers_out_and_stores_them_as_null():
    task = RaisesOnBoom([Problem(f"p{i}", q, "2") for i, q in enumerate(PLAY)])
    env = agon_env.make("agon/math-v0", task=task)
    agents = {"agent_a": ScriptedAgent("a", _says(0)), "agent_b": ScriptedAgent("b", _says(1))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the env warns of the scorer's failure (tested elsewhere)
        episodes = play_episodes(env, agents, [Start(i, "agent_a", i) for i in range(4)]).episodes
    out = summarize({0: episodes})
    p1 = out["pass@1"]
    assert (p1["successes"], p1["trials"], p1["unjudged"]) == (3, 3, 1)  # 86f3fbc: 3 of 4
    assert out["pass@k"] == {"1": 1.0}  # 86f3fbc: 0.75
    first = out["first_turn_pass@1"]
    assert (first["successes"], first["trials"], first["unjudged"]) == (1, 3, 1)
    conv = out["conversion"]
    # Q0's draft is not known wrong and Q3's fix not known: only Q1 counts (86f3fbc: 2 of 3)
    assert (conv["successes"], conv["trials"], conv["unjudged"]) == (1, 1, 2)
    assert out["score_errors"] == 2
    stored = {"episodes": [e.to_dict() for e in episodes]}
    assert [e["correct"] for e in stored["episodes"]] == [True, True, True, None]
    assert outcomes(stored, ["p0", "p1", "p2", "p3"], "first_correct") == [None, 0, 1, 0]
    assert stored["episodes"][0]["turns"][0]["verdict"] is None
