"""``agon study eval DIR --env ID``: a finished smoke study's units evaluated on a second task,
kept apart from the study's own results (exploratory), and skipped when asked again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def agon(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "agon_env.cli", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd=ROOT)


def test_transfer_eval_of_the_smoke_units_on_a_second_task(tmp_path: Path) -> None:
    plan = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())
    plan["seeds"], plan["evaluation"]["base_methods"] = [0], []
    path = tmp_path / "smoke1.yaml"
    path.write_text(yaml.safe_dump(plan))
    out = tmp_path / "study"
    done = agon("study", "run", str(path), "--out", str(out), "--workers", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    before = json.loads((out / "results.json").read_text())
    status = agon("study", "status", str(out))
    assert "2 of 2 units done, 0 running, 0 failed" in status.stdout and "nothing left" in status.stdout

    moved = agon("study", "eval", str(out), "--env", "agon/linear-v0", "--workers", "2")
    assert moved.returncode == 0, moved.stdout[-3000:] + moved.stderr[-3000:]
    assert "0 of 2 trained units evaluated on agon/linear-v0; running 2" in moved.stdout
    assert "Transfer to agon_linear-v0 (exploratory" in moved.stdout
    doc = json.loads((out / "results.json").read_text())
    section = doc["transfer"]["agon_linear-v0"]
    assert section["exploratory"] and section["env"] == "agon/linear-v0" and len(section["ids"]) == 6
    assert set(section["arms"]) == {"grpo", "agon"} and set(section["arms"]["agon"]["0"]["outcomes"])
    assert doc["summary"] == before["summary"]  # never in the study's own summary or verdicts
    assert agon("study", "verify", str(out / "results.json")).returncode == 0
    # report.md shows the section at once and stays sealed to the results it now renders
    sealed = agon("study", "verify", str(out / "results.json"), "--report", str(out / "report.md"))
    assert sealed.returncode == 0, sealed.stdout[-2000:] + sealed.stderr[-2000:]
    assert "### Transfer to agon_linear-v0 (exploratory" in (out / "report.md").read_text()

    again = agon("study", "eval", str(out), "--env", "agon/linear-v0")
    assert (
        again.returncode == 0
        and "2 of 2 trained units evaluated on agon/linear-v0; running 0" in again.stdout
    )
    report = agon("study", "report", str(out))  # a report rebuilds the results and keeps the section
    assert (
        report.returncode == 0
        and json.loads((out / "results.json").read_text())["transfer"] == doc["transfer"]
    )
    # ... and report.md shows it after the study's own tables, each cell with its interval
    page = (out / "report.md").read_text()
    assert "### Transfer to agon_linear-v0 (exploratory" in page and "= 0 % [0, 0]" in page
    assert "| agon − grpo, standalone | +0.0 |" in page
