"""How often two adapters' independent answers to the same problems differ (eval, hand-computed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from eval_fakes import gold

from agon_env.agents.protocol import Completion
from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.methods import Policies
from agon_env.evaluation.report import _complementarity_section
from agon_env.evaluation.splits import load_eval_data
from agon_env.stats import answer_agreement, answer_key


class TableAgent:
    """Answers the i-th test problem (in sorted prompt order) by ``answers[i](gold)``; None: no answer."""

    def __init__(self, name: str, answers: Sequence[Any], order: Sequence[str]) -> None:
        self.name, self.answers, self.order = name, answers, list(order)

    def act(
        self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        out = []
        for obs in observations:
            ans = self.answers[self.order.index(obs["problem"])](gold(obs["problem"]))
            tail = "" if ans is None else f"<answer>{ans}</answer>"
            out.append(Completion(text=f"<summary>worked</summary>{tail}", completion_ids=[1, 2, 3]))
        return out


def test_answer_agreement_counts_by_hand():
    c = answer_agreement(["4", " X+1 ", "5", None, "", "4.0"], ["4", "x + 1", "6", "3", None, "4"])
    # compared: 4/4 same, x+1 same (whitespace, case), 5/6 differ, 4.0/4 differ (strings); two missing
    assert (c.n, c.both_answered, c.differ, c.missing, c.rate) == (6, 4, 2, 2, 0.5)
    assert answer_key("  ") is None and answer_key(" A b ") == "ab"
    with pytest.raises(ValueError):
        answer_agreement(["1"], [])


def test_eval_reports_how_often_the_adapters_standalone_answers_differ():
    data = load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=5, val_problems=0, seed=0)
    order = [data.test.task[i].prompt for i in data.test.indices]
    a = TableAgent("a", [str, lambda g: g + 1, lambda g: g + 2, lambda g: None, str], order)
    b = TableAgent("b", [str, lambda g: g + 3, lambda g: g + 2, str, lambda g: f"{g}.0"], order)
    res = Evaluator(data, seeds=[0, 1], methods=["standalone"]).evaluate(
        Policies(label="run", base=None, adapters={"agent_a": a, "agent_b": b})
    )
    comp = res["complementarity"]["adapters"]
    # Per seed: p0 same; p1 both wrong, different answers; p2 both wrong, the same answer;
    # p3 a gave none (left out); p4 "g" vs "g.0" differ as strings (both right). Two seeds.
    assert comp["answers_differ"] == {"n": 10, "both_answered": 8, "differ": 4, "missing": 2, "rate": 0.5}
    # Outcomes alone cannot tell p1 from p2: both wrong on each, exactly one wrong on p3.
    assert (comp["both_wrong"], comp["exactly_one_wrong"]) == (4, 2)
    table = "\n".join(_complementarity_section(res["complementarity"]))
    assert "| answers differ |" in table and "| 4/8 (50.0%) |" in table


def test_a_run_trained_on_redacted_summaries_is_evaluated_with_them() -> None:
    """A run's ``env.exchange`` picks the channel its cascades read (an old folder's
    ``env.redact_answer`` is read as ``redacted``: :mod:`agon_env.upgrade`)."""
    from agon_env.algorithms.validation import resolve
    from agon_env.config import from_dict
    from agon_env.upgrade import upgrade_config

    assert resolve(from_dict(upgrade_config({"env": {"redact_answer": True}}))).exchange == "redacted"
    assert resolve(from_dict({})).exchange == "summary"
    assert resolve(from_dict({"env.exchange": "trace"})).exchange == "trace"
    hidden = resolve(from_dict({"algo": "hidden-draft"}))  # trains on none; its cascades read summaries
    assert hidden.env.exchange == "none" and hidden.exchange == "summary"
    data = load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=2, val_problems=0, seed=0)
    assert data.env("challenge", data.test, "redacted").unwrapped.channel.name == "redacted"
    assert data.env("challenge", data.test).unwrapped.channel.name == "summary"
