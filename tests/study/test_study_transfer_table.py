"""The transfer table (``agon study eval``): each cell with its interval over seeds × problems and
the plan's comparisons on the new task, computed as the study's own summary is -- from a
hand-built section, so every figure below is checked against a count done by hand."""

from __future__ import annotations

from agon_env.study.transfer import summary, table

PLAN = {
    "two_stage": {"grpo": "self-cascade", "agon": "cascade"},
    "comparisons": [["agon", "grpo"]],
    "exploratory": [],
    "decision": {"confidence": 0.95, "every_seed": True},
}


def unit(outcomes: dict[str, list[int]], chosen: str | None = None) -> dict:
    return {
        "outcomes": outcomes,
        "first_outcomes": {},
        "mean_length": {m: 10.0 for m in outcomes},
        "chosen_cascade": chosen,
    }


def section() -> dict:
    grpo = {s: unit({"standalone:agent_a": [0, 0, 1, 0], "self-cascade:agent_a": [0, 0, 1, 0]}) for s in "01"}
    agon = {
        s: unit(
            {
                "standalone:agent_a": [1, 1, 1, 0],
                "standalone:agent_b": [1, 1, 1, 0],
                "cascade:agent_a>agent_b": [1, 1, 1, 1],
            },
            chosen="cascade:agent_a>agent_b",
        )
        for s in "01"
    }
    return {
        "env": "agon/linear-v0",
        "split": "test",
        "ids": list("wxyz"),
        "arms": {"grpo": grpo, "agon": agon},
    }


def test_cells_carry_their_interval_and_the_plans_comparisons_their_difference() -> None:
    s = summary(section(), PLAN)
    assert s["arms"]["agon"]["two-stage"]["mean"] == 1.0  # the cascade chosen on the new task's validation
    # agon − grpo standalone: 3/4 − 1/4 per seed = +50 pp; discordant cells: problems w, x on 2 seeds
    d = s["paired"]["agon − grpo, standalone"]
    assert d["mean"] == 0.5 and d["discordant"] == {"first_only": 4, "second_only": 0}
    assert s["paired"]["agon − grpo, two-stage"]["mean"] == 0.75  # 4/4 − 1/4

    text = table("agon_linear-v0", section(), PLAN)
    assert "exploratory" in text and "95 % interval over seeds × problems" in text
    low, high = s["arms"]["grpo"]["standalone:agent_a"]["interval"]
    assert f"2/8 = 25 % [{100 * low:.0f}, {100 * high:.0f}]" in text and low < 0.25 < high
    assert "| agon − grpo, standalone | +50.0 | [" in text and "| s0 +50.0 · s1 +50.0 | 4 / 0 |" in text
    assert "| agon − grpo, two-stage | +75.0 |" in text
