"""The end-of-run held-out check, with fake agents whose right answers are known in advance."""

from __future__ import annotations

import json

import pytest
from eval_fakes import FakeAgent, gold, hashed

from agon_env.envs.tasks.arith import ArithTask
from agon_env.envs.tasks.base import normalize_prompt
from agon_env.evaluation.heldout import NoHeldout, heldout_check, heldout_policies, table_rows, write_heldout
from agon_env.evaluation.splits import build_task


def _policies(**adapters):
    return heldout_policies("run", FakeAgent("base", hashed("base", 2)), adapters)


def test_base_and_adapters_on_held_out_problems_with_paired_differences(tmp_path):
    policies = _policies(agent_a=FakeAgent("a", lambda p: True), agent_b=FakeAgent("b", hashed("base", 2)))
    result = heldout_check("agon/arith-v0", {"difficulty": 2}, policies, problems=50)
    ids = result["problem_ids"]
    assert len(ids) == 50 and all(i.startswith("test-") for i in ids)
    # Disjoint from the training pool by content, and the check says so.
    train = {normalize_prompt(ArithTask(2, split="train")[i].prompt) for i in range(3000)}
    test = ArithTask(2, split="test")
    assert not {normalize_prompt(test[int(i.split("-")[1])].prompt) for i in ids} & train
    assert result["disjoint"]["test_and_training"] == {"this run": 0}
    rows = result["policies"]
    expected_base = [int(hashed("base", 2)(test[int(i.split("-")[1])].prompt)) for i in ids]
    assert rows["base"]["outcomes"] == expected_base  # one sample per problem, in id order
    assert rows["agent_a"]["outcomes"] == [1] * 50
    assert rows["agent_a"]["pass@1"]["successes"] == 50
    wrong = 50 - sum(expected_base)
    assert rows["agent_a"]["minus_base"]["mean"] == pytest.approx(wrong / 50)
    # agent_b is right exactly where the base is: a paired difference of exactly 0.
    assert rows["agent_b"]["minus_base"] == {"mean": 0.0, "low": 0.0, "high": 0.0, "seeds": 1, "problems": 50}
    table = {r[0]: r for r in table_rows(result)}
    assert table["base (untrained)"][3] == "-"
    assert table["agent_a"][4] == "better" and table["agent_b"][4] == "no change"
    assert table["agent_b"][3] == "+0.00 [+0.00, +0.00]" and result["task"] == "arith-d2"
    path = write_heldout(result, tmp_path)
    assert json.loads(path.read_text())["policies"]["agent_a"]["outcomes"] == [1] * 50


def test_a_split_smaller_than_asked_gives_all_it_has():
    result = heldout_check("agon/arith-v0", {"difficulty": 1}, _policies(), problems=50)
    assert len(result["problem_ids"]) == 17  # level 1's whole test split


def test_test_problems_in_the_training_pool_are_refused(monkeypatch):
    # The overlap is checked on the prompts, not assumed from the split names: a training pool
    # that holds the test split (a task without held-out problems) stops the check.
    from agon_env.evaluation import heldout

    monkeypatch.setattr(heldout, "training_pool", lambda env, kw: build_task(env, kw, "test"))
    with pytest.raises(NoHeldout, match="training"):
        heldout_check("agon/arith-v0", {"difficulty": 2}, _policies(), problems=4)


def test_fake_agent_answers_are_what_the_outcomes_say():
    # The fixture itself: a FakeAgent is right exactly where ``solves`` says (guards the test above).
    prompt = ArithTask(2, split="test")[0].prompt
    out = FakeAgent("x", lambda p: False).act([{"problem": prompt, "role": 0, "draft": None}])[0]
    assert f"<answer>{gold(prompt) + 1}</answer>" in out.text


class _CodeAgent:
    """Answers every pyfunc problem with one program: here, one that never returns."""

    def __init__(self, name: str, body: str) -> None:
        self.name, self.body = name, body

    def act(self, observations, *, seeds=None):
        import re

        from agon_env.agents.protocol import Completion

        out = []
        for obs in observations:
            name, args = re.search(r"`(\w+)\(([^)]*)\)`", obs["problem"]).groups()
            code = f"def {name}({args}):\n    {self.body}\n"
            text = f"Code. <summary>A loop.</summary><answer>\n```python\n{code}```\n</answer>"
            out.append(Completion(text=text, completion_ids=[1, 2, 3], agent=self.name))
        return out


def test_code_time_outs_are_counted_in_the_held_out_record():
    # A program over its time limit got no verdict: heldout.json holds a null outcome for it,
    # leaves it out of pass@1 and of the paired difference, and says how many, per policy
    # (86f3fbc scored it 0, a wrong answer: outcomes [0, 0], pass@1 0 of 2).
    base = _CodeAgent("base", "return None")
    looping = _CodeAgent("a", "while True:\n        pass")
    policies = heldout_policies("run", base, {"agent_a": looping})
    result = heldout_check("agon/pyfunc-v0", {"difficulty": 1, "size": 30}, policies, problems=2)
    rows = result["policies"]
    assert rows["agent_a"]["outcomes"] == [None, None] and rows["agent_a"]["score_timeouts"] == 2
    a = rows["agent_a"]["pass@1"]
    assert (a["trials"], a["unjudged"], a["rate"], rows["agent_a"]["minus_base"]) == (0, 2, None, None)
    assert rows["base"]["score_timeouts"] == 0 and rows["base"]["score_errors"] == 0
    assert rows["base"]["pass@1"]["trials"] == 2
    table = {r[0]: r for r in table_rows(result)}
    assert table["agent_a"][1:] == ("0/0 = -", "[0.00, 1.00]", "-", "nothing judged for both")
