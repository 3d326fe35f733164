"""A failing unit beside passing ones: the others finish, ``--retries`` tries it again, the
report names it. The unit fails for real: its run folder holds a corrupt checkpoint, so its
resumption cannot start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_failed_unit_does_not_stop_the_others_and_the_report_names_it(tmp_path: Path) -> None:
    plan = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())
    plan["arms"], plan["seeds"], plan["comparisons"] = {"grpo": {"algo": "grpo"}}, [0, 1], []
    plan["evaluation"]["base_methods"] = []
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(plan))
    out = tmp_path / "study"
    broken = out / "runs" / "grpo-seed0"
    broken.mkdir(parents=True)
    (broken / "checkpoint.pt").write_bytes(b"not a checkpoint")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "agon_env.cli",
        "study",
        "run",
        str(path),
        "--out",
        str(out),
        "--retries",
        "1",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd=ROOT)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "grpo-seed1: done in" in done.stdout  # the failure did not stop the other unit
    assert "retrying grpo-seed0 (try 2 of 2)" in done.stdout
    assert (out / "logs" / "grpo-seed0.log").read_text().count("resuming from its last checkpoint") == 2
    failed = json.loads((out / "failed.json").read_text())
    assert list(failed) == ["grpo-seed0"] and failed["grpo-seed0"]
    assert f"grpo-seed0 (FAILED: {failed['grpo-seed0']})" in (out / "report.md").read_text()
    doc = json.loads((out / "results.json").read_text())
    assert doc["failed_units"] == failed and list(doc["outcomes"]["arms"]["grpo"]) == ["1"]
