"""The report's notes (issue #57 item 5): an arm that never updated, samples cut at the token cap,
a base that solves nothing. ``data/smoke_results.json`` is the tiny random model's smoke study:
every group dropped at every step, every outcome 0."""

from __future__ import annotations

import json
from pathlib import Path

from agon_env.study import health, tables

HERE = Path(__file__).resolve().parent
SMOKE = HERE / "data" / "smoke_results.json"
STUDY_2 = HERE.parents[1] / "docs" / "results" / "study_2.json"


def smoke() -> dict:
    return json.loads(SMOKE.read_text())


def test_a_study_whose_arms_never_updated_says_so_in_its_report() -> None:
    doc = smoke()
    [said] = health.never_updated(doc)
    assert said.startswith("No arm ever updated: at every step of every unit every group was dropped")
    shown = tables.markdown(doc, "study", "r.json")
    assert "- No arm ever updated: at every step of every unit" in shown
    assert "- The untrained base solved none of the 6 test problems (base-few-shot)" in shown


def test_an_arm_that_updated_once_is_not_named_and_a_partly_stuck_arm_names_its_units() -> None:
    doc = smoke()
    doc["outcomes"]["arms"]["agon"]["0"]["training"]["groups_dropped"]["all"] = 0.75
    doc["outcomes"]["arms"]["agon"]["1"]["training"]["groups_dropped"]["all"] = 0.5
    assert health.never_updated(doc) == [
        "grpo never updated: at every step of every unit every group was dropped (its samples all "
        "earned one reward, so GRPO had no variance to learn from); it is compared as the untrained "
        "model it started as."
    ]
    doc["outcomes"]["arms"]["grpo"]["1"]["training"]["groups_dropped"]["all"] = 0.75
    [said] = health.never_updated(doc)
    assert said.startswith("grpo-seed0 never updated: at every step every group was dropped")


def test_the_token_cap_rate_per_unit() -> None:
    doc = smoke()
    assert health.token_cap(doc) == []  # recorded before units counted cut turns: nothing claimed
    doc["outcomes"]["base"] |= {"token_cap": {"base-few-shot": 6}, "turns": {"base-few-shot": 6}}
    agon = doc["outcomes"]["arms"]["agon"]["0"]
    agon["token_cap"] = {"standalone:agent_a": 1, "cascade:agent_a>agent_b": 2, "standalone:agent_b": None}
    agon["turns"] = {"standalone:agent_a": 6, "cascade:agent_a>agent_b": 12, "standalone:agent_b": 6}
    doc["outcomes"]["arms"]["grpo"]["0"] |= {
        "token_cap": {"standalone:agent_a": 0},
        "turns": {"standalone:agent_a": 6},
    }
    [line] = health.token_cap(doc)
    assert "base 100 % (6 of 6, cap 8); agon-seed0 17 % (3 of 18, cap 8)." in line
    assert "grpo-seed0" not in line  # none cut


def test_a_healthy_study_gets_no_notes() -> None:
    doc = json.loads(STUDY_2.read_text())
    assert health.notes(doc) == []
    assert "Read the tables with these in mind" not in tables.markdown(doc, "study-2", "r.json")
