"""An evaluation counts the turns cut at the token cap (``finish_reason == "length"``) per method,
so a study's report can say how often its samples ran out of tokens (issue #57 item 5)."""

from __future__ import annotations

import dataclasses

import pytest
from eval_fakes import FakeAgent, hashed

from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.methods import Policies
from agon_env.evaluation.splits import load_eval_data


class CutAgent(FakeAgent):
    """A :class:`FakeAgent` whose completions of the problems ``cut`` picks ran to the cap."""

    def __init__(self, name: str, cut) -> None:
        super().__init__(name, hashed(name, 2))
        self.cut = cut

    def act(self, observations, *, seeds=None):
        out = super().act(observations, seeds=seeds)
        return [
            dataclasses.replace(c, finish_reason="length") if self.cut(o["problem"]) else c
            for o, c in zip(observations, out, strict=True)
        ]


@pytest.fixture(scope="module")
def data():
    return load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=30, val_problems=10, seed=0)


def test_turns_cut_at_the_cap_are_counted_per_method(data) -> None:
    cut = hashed("cut", 3)  # about a third of the problems run out of tokens
    a, b = CutAgent("a", lambda p: not cut(p)), CutAgent("b", lambda p: False)
    res = Evaluator(data, seeds=[0], methods=["standalone", "cascade"]).evaluate(
        Policies(label="run", base=None, adapters={"agent_a": a, "agent_b": b})
    )
    m, prompts = res["methods"], [data.test.task[i].prompt for i in data.test.indices]
    n, cut_a = len(prompts), sum(not cut(p) for p in prompts)
    assert 0 < cut_a < n
    assert (m["standalone:agent_a"]["token_cap"], m["standalone:agent_a"]["turns"]) == (cut_a, n)
    assert (m["standalone:agent_b"]["token_cap"], m["standalone:agent_b"]["turns"]) == (0, n)
    # a cascade counts both turns: a's draft is cut where a's standalone sample is (it is the same)
    assert (m["cascade:agent_a>agent_b"]["token_cap"], m["cascade:agent_a>agent_b"]["turns"]) == (
        cut_a,
        2 * n,
    )
