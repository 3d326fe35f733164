"""``agon study status``: a running study and a finished one, read from the folder's files alone.

The running study is its files as a run leaves them mid-way: one unit done, one whose lock a live
process (this test) holds with two of its four steps logged, one begun and killed, one failed,
one not begun."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from agon_env.study.commands.study import main
from agon_env.study.plan import load
from agon_env.study.status import remaining, resume_note, states
from agon_env.study.units import Unit

ROOT = Path(__file__).resolve().parents[2]


def metrics(run: Path, rows: int) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": i}) + "\n" for i in range(rows)))


def lock(study: Path, name: str, pid: int, at: float) -> None:
    path = study / "locks" / name / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(pid))
    os.utime(path, (at, at))


def finish(study: Path, name: str, pid: int, start: float, seconds: float) -> None:
    lock(study, name, pid, start)
    folder = study / "eval" / name
    folder.mkdir(parents=True)
    (folder / "eval.json").write_text("{}")
    (folder / "unit.json").write_text("{}")
    os.utime(folder / "unit.json", (start + seconds, start + seconds))


@pytest.fixture
def study(tmp_path: Path) -> Path:
    out = tmp_path / "smoke"
    out.mkdir()
    shutil.copy(ROOT / "studies" / "smoke.yaml", out / "plan.yaml")  # base + grpo, agon × seeds 0, 1
    (out / "study.json").write_text(json.dumps({"prompts": "x", "started_at": "2026-01-01T00:00:00Z"}))
    return out


def test_a_running_study_names_each_units_state(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = 2**22 + 7  # no such pid: the unit's holder is gone
    t0 = 1_767_225_600.0  # the study's start, 2026-01-01T00:00:00Z
    finish(study, "base", dead, t0, 10)
    metrics(study / "runs" / "grpo-seed0", 4)
    finish(study, "grpo-seed0", dead, t0 + 10, 40)
    metrics(study / "runs" / "agon-seed0", 2)
    (study / "runs" / "agon-seed0" / "checkpoint.pt").write_bytes(b"")
    lock(study, "agon-seed0", os.getpid(), t0 + 50)
    metrics(study / "runs" / "grpo-seed1", 1)
    lock(study, "grpo-seed1", dead, t0 + 20)
    (study / "failed.json").write_text(json.dumps({"agon-seed1": "RuntimeError: out of memory"}))
    got = {u.name: u.describe() for u in states(study)}
    assert got == {
        "base": "done in 10 s",
        "grpo-seed0": "done in 40 s",
        "agon-seed0": "running at step 2 of 4",
        "grpo-seed1": "stopped at step 1 of 4 (the next run resumes it)",
        "agon-seed1": "failed: RuntimeError: out of memory",
    }
    # left: grpo-seed0's 4 one-turn steps took 40 s (10 s a step-turn); half of agon-seed0's 4
    # two-turn steps, 3/4 of grpo-seed1's and all of agon-seed1's remain: an agon unit costs twice
    assert remaining(states(study)) == pytest.approx(10 * (8 * 0.5 + 4 * 0.75 + 8))
    assert main(["status", str(study)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "2 of 5 units done, 1 running, 1 failed" in head
    assert "about 150 s left (from 1 finished units)" in head
    spec = study / "spec.json"
    unit = Unit(
        name="agon-seed0", train=None, eval=[], eval_dir="", run_dir=str(study / "runs" / "agon-seed0")
    )
    spec.write_text(json.dumps(dataclasses.asdict(unit)))
    assert resume_note(spec) == " (resuming from step 2, its last checkpoint)"


def test_a_finished_study_says_nothing_is_left(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = load(study / "plan.yaml")
    t0 = 1_767_225_600.0
    names = ["base"] + [f"{arm}-seed{s}" for s in plan.seeds for arm in plan.arms]
    for i, name in enumerate(names):
        if name != "base":
            metrics(study / "runs" / name, 4)
        finish(study, name, 2**22 + 7, t0 + 10 * i, 10)
    assert [u.state for u in states(study)] == ["done"] * 5
    assert main(["status", str(study)]) == 0
    out = capsys.readouterr().out
    assert "5 of 5 units done, 0 running, 0 failed; 50 s since it started; nothing left" in out
