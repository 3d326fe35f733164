"""Training metrics leave an answer the scorer never judged out of every rate (issue 58, item 2).

On 86f3fbc only ``acc/*`` did: a draft whose ``score()`` raised counted as a wrong draft the
challenger "converted", as a win for the challenger and as no tie.
"""

from __future__ import annotations

import warnings

from agon_env.envs.tasks.base import ListTask, Problem


class RaisesOnBoom(ListTask):
    name = "raises-on-boom"

    def score(self, problem: Problem, answer: str) -> bool:
        if answer == "boom":
            raise ValueError("cannot judge")
        return answer == problem.answer


def _metrics(draft: str, challenge: str) -> dict[str, float]:
    import agon_env
    from agon_env.agents import ScriptedAgent
    from agon_env.algorithms.metrics import rollout_metrics
    from agon_env.algorithms.rollout import rollout

    env = agon_env.make("agon/math-v0", task=RaisesOnBoom([Problem("p0", "What is 1 + 1?", "2")]))
    agents = {
        "agent_a": ScriptedAgent("a", [f"x <summary>it is {draft}</summary><answer>{draft}</answer>"]),
        "agent_b": ScriptedAgent("b", [f"y <summary>{challenge}</summary><answer>{challenge}</answer>"]),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the env warns of the scorer's failure (tested elsewhere)
        return rollout_metrics(rollout(env, agents, [0], 2, drafter="agent_a"))


def test_an_unjudged_draft_is_no_wrong_draft_converted_and_no_win():
    m = _metrics("boom", "2")
    assert m["score_errors"] == 2
    for rate in ("conversion_rate", "tie_rate", "win_rate/agent_a", "win_rate/agent_b"):
        assert rate not in m, rate  # 86f3fbc: conversion 1.0, agent_b's win 1.0, tie 0.0
        assert m[f"unjudged/{rate}"] == 2.0
        assert f"trials/{rate}" not in m
    assert m["unjudged/divergence/challenge_changed_answer"] == 2.0
    assert m["unjudged/acc/drafter"] == 2.0 and m["acc/challenger"] == 1.0
    assert "unjudged/acc/challenger" not in m


def test_a_wrong_draft_with_an_unjudged_challenge_is_no_conversion_either():
    m = _metrics("3", "boom")
    assert "conversion_rate" not in m and m["unjudged/conversion_rate"] == 2.0  # 86f3fbc: 0.0
    assert m["acc/drafter"] == 0.0 and m["unjudged/acc/challenger"] == 2.0
    judged = _metrics("3", "2")  # every answer judged: the rates as before, no unjudged count
    assert (judged["conversion_rate"], judged["win_rate/agent_b"], judged["tie_rate"]) == (1.0, 1.0, 0.0)
    assert not [k for k in judged if k.startswith("unjudged/")]
