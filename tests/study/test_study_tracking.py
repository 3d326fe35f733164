"""``agon study run --report-to``: the units' tracker grouping and the study's summary run
(wandb offline: nothing leaves the machine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agon_env.study.commands.study import main
from agon_env.study.tracking import log_summary, scalars, spec_env, unit_env

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "results" / "study_2.json"


def test_units_of_one_study_are_one_wandb_group_with_their_arm_as_job_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("WANDB_RUN_GROUP", "WANDB_JOB_TYPE", "TRACKIO_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    assert unit_env("sweep", "agon@lr=1e-4-seed2", ["wandb", "trackio"]) == {
        "WANDB_RUN_GROUP": "sweep",
        "WANDB_JOB_TYPE": "agon@lr=1e-4",
        "TRACKIO_PROJECT": "sweep",
    }
    assert unit_env("sweep", "agon-seed0", ["tensorboard"]) == {}
    (tmp_path / "units").mkdir()
    shutil.copy(ROOT / "studies" / "smoke.yaml", tmp_path / "plan.yaml")
    spec = tmp_path / "units" / "grpo-seed1.json"
    assert spec_env(spec, {"report_to": ["wandb"]}) == {"WANDB_RUN_GROUP": "smoke", "WANDB_JOB_TYPE": "grpo"}
    assert spec_env(spec, None) == {}  # the base trains nothing: no tracker run
    monkeypatch.setenv("WANDB_RUN_GROUP", "mine")  # the user's own choice is kept
    assert "WANDB_RUN_GROUP" not in unit_env("sweep", "agon-seed0", ["wandb"])


def test_the_studys_summary_is_logged_to_wandb_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    doc = json.loads(RECORDED.read_text())
    doc["plan"]["study"] = {"name": "recorded"}  # a study recorded before `agon study` has no plan of its own
    values = scalars(doc)
    arm = next(iter(doc["outcomes"]["arms"]))
    assert any(k.startswith(f"pass@1/{arm}/") for k in values) and all(0 <= v <= 1 for v in values.values())
    (run,) = log_summary(doc, tmp_path, ["wandb"])
    assert run.group == "recorded"
    assert run.job_type == "summary" and run.name.endswith("-summary")
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_an_unknown_tracker_is_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert (
        main(["run", str(ROOT / "studies" / "smoke.yaml"), "--out", str(out), "--report-to", "wandbb"]) != 0
    )
    assert "--report-to: unknown tracker 'wandbb'" in capsys.readouterr().err and not out.exists()
