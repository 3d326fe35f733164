"""upgrade.py's tables of old layouts, and the study modules reading old layouts only through them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agon_env.metric_names import CHALLENGE_CHANGED_ANSWER
from agon_env.upgrade import LEGACY_CHANGED, OLD_METRICS, PRE_STUDY, old_metrics, pre_study, shown_metric

ROOT = Path(__file__).resolve().parents[1]


def test_an_old_metric_is_kept_under_its_own_name_and_shown_only_without_todays() -> None:
    assert old_metrics([{"step": 0}, {LEGACY_CHANGED: 0.5}]) == [LEGACY_CHANGED]
    assert old_metrics([{CHALLENGE_CHANGED_ANSWER: 0.5}]) == []
    assert shown_metric(CHALLENGE_CHANGED_ANSWER, {LEGACY_CHANGED}.__contains__) == LEGACY_CHANGED
    both = {LEGACY_CHANGED, CHALLENGE_CHANGED_ANSWER}.__contains__
    assert shown_metric(CHALLENGE_CHANGED_ANSWER, both) == CHALLENGE_CHANGED_ANSWER
    assert shown_metric(CHALLENGE_CHANGED_ANSWER, set().__contains__) == CHALLENGE_CHANGED_ANSWER
    assert OLD_METRICS[LEGACY_CHANGED].today == CHALLENGE_CHANGED_ANSWER


def test_a_results_file_recorded_before_agon_study_reads_as_those_studies_ran() -> None:
    recorded = json.loads((ROOT / "docs/results/replication_cpu.json").read_text())["plan"]
    study = json.loads((ROOT / "tests/study/data/smoke_results.json").read_text())["plan"]
    assert pre_study(recorded) is PRE_STUDY and pre_study(study) is None
    assert ("agon", "grpo") in PRE_STUDY.comparisons and PRE_STUDY.two_stage == {"grpo": "self-cascade"}


def test_no_study_module_names_an_old_layout() -> None:
    """Old names and wordings live in upgrade.py; the study modules ask it (three branched on them)."""
    old = re.compile(r"LEGACY_|answer_disagreement|\bPAIRS\b|\bTWO_STAGE\b")
    found = [
        f"{p.name}:{n}"
        for p in sorted((ROOT / "agon_env/study").glob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if old.search(line)
    ]
    assert found == []


def test_a_registration_frozen_before_a_field_agrees_with_todays_value() -> None:
    from agon_env.upgrade import registered

    old = {"plan_sha256": "a" * 64, "prompts": "p"}
    assert registered(old, "preset_sha256", "b" * 64) == "b" * 64 and registered(old, "anchor", None) is None
    assert registered({**old, "preset_sha256": "c" * 64}, "preset_sha256", "b" * 64) == "c" * 64
    with pytest.raises(KeyError):
        registered(old, "registered_at", "2026-01-01T00:00:00Z")  # always recorded: its absence is damage
