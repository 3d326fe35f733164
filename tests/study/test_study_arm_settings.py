"""The report's header names each arm's own settings (issue #57 item 5): a grid over ``optim.lr``
read "lr 0.0002" (the training base's, which no arm ran)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from agon_env.study import tables
from agon_env.study.plan import from_dict
from agon_env.study.results import plan_record
from agon_env.study.verify import VerifyError, verify

ROOT = Path(__file__).resolve().parents[2]
SMOKE_PLAN = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())
SMOKE = Path(__file__).resolve().parent / "data" / "smoke_results.json"


def header(doc: dict) -> str:
    return "\n".join(tables.introduction(doc, "r.json"))


def test_a_grid_over_lr_shows_each_arms_lr() -> None:
    plan = from_dict({**copy.deepcopy(SMOKE_PLAN), "grid": {"optim.lr": ["1e-4", "5e-4"]}})
    record = plan_record(plan)
    assert record["arm_settings"]["agon@lr=5e-4"]["lr"] == 5e-4
    doc = json.loads(SMOKE.read_text())
    doc["plan"] = record
    said = header(doc)
    assert "lr 0.0001 (grpo@lr=1e-4, agon@lr=1e-4) or 0.0005 (grpo@lr=5e-4, agon@lr=5e-4)" in said
    assert "lr 0.0002" not in said  # the training base's lr, which no arm ran
    assert "4 steps × B = 2 × N = 2, T = 0.7, 8 new tokens" in said  # shared: one value each


def test_arms_that_share_a_setting_print_it_once_and_older_files_read_as_before() -> None:
    doc = json.loads(SMOKE.read_text())  # recorded before arm_settings
    assert "lr 0.0002, planned seeds" in header(doc)
    doc["plan"]["arm_settings"] = {arm: {**_base(doc), "lr": 3e-4} for arm in ("grpo", "agon")}
    assert "lr 0.0003, planned seeds" in header(doc)


def _base(doc: dict) -> dict:
    keys = ("steps", "batch_problems", "num_generations", "max_new_tokens", "temperature", "lr")
    return {k: doc["plan"][k] for k in keys}


def test_verify_reads_arm_settings_when_present_and_tolerates_them_absent(tmp_path: Path) -> None:
    doc = json.loads(SMOKE.read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    verify(path)  # recorded before arm_settings: not a departure
    doc["plan"]["arm_settings"] = {arm: {**_base(doc), "lr": 9e-4} for arm in ("grpo", "agon")}
    path.write_text(json.dumps(doc))
    with pytest.raises(VerifyError, match=r"plan\.arm_settings: not what the registered plan resolves to"):
        verify(path)
    doc["plan"]["arm_settings"] = {arm: _base(doc) for arm in ("grpo", "agon")}
    path.write_text(json.dumps(doc))
    verify(path)  # what the registered plan resolves to
