"""Newcomer friction (issue #57 item 6): a closed pipe, the time estimate, the console's words."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import agon_env
from agon_env.study.units import Unit

ROOT = Path(__file__).resolve().parents[2]
CODE = Path(agon_env.__file__).resolve().parents[1]
"""The checkout whose package the tests import: the children run the same one."""


@pytest.mark.parametrize("sub", ["status", "register"])
def test_a_reader_that_leaves_gets_no_traceback(tmp_path: Path, sub: str) -> None:
    plan = tmp_path / "plan.yaml"
    shutil.copy(ROOT / "studies" / "smoke.yaml", plan)
    (tmp_path / "st").mkdir()
    shutil.copy(plan, tmp_path / "st" / "plan.yaml")
    argv = {"status": [str(tmp_path / "st")], "register": [str(plan), "--out", str(tmp_path / "reg")]}[sub]
    env = {**os.environ, "PYTHONPATH": str(CODE)}
    p = subprocess.Popen(
        [sys.executable, "-m", "agon_env.cli", "study", sub, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # `| head -0`: the reader is gone before the first line
    err = p.stderr.read().decode()
    assert (p.wait(timeout=120), err) == (141, "")


def test_an_agon_unit_weighs_twice_a_grpo_one_in_the_estimate() -> None:
    from agon_env.study.plan import episode_turns

    assert (episode_turns("grpo"), episode_turns("agon"), episode_turns("self-refine")) == (1, 2, 2)


def test_a_unit_trained_already_says_it_only_evaluates(tmp_path: Path) -> None:
    from agon_env.study.status import resume_note

    run = tmp_path / "runs" / "agon-seed0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": i}) + "\n" for i in range(3)))
    (run / "checkpoint.pt").write_bytes(b"")
    spec = tmp_path / "spec.json"
    unit = Unit(name="agon-seed0", eval=[], eval_dir="", run_dir=str(run), steps=3)
    spec.write_text(json.dumps(dataclasses.asdict(unit)))
    assert resume_note(spec) == " (resuming from step 3, its last checkpoint)"  # curves not yet written
    (run / "curves.png").write_bytes(b"")  # written after the last adapter is saved: trained
    assert resume_note(spec) == " (trained already: evaluating only)"


class FakeRay:
    """Ray's calls the launcher makes: each task "starts" (its child takes the unit's lock) on the
    first wait, and they end one per wait after that."""

    def __init__(self, study: Path) -> None:
        self.study, self.waits = study, 0

    def is_initialized(self) -> bool:
        return True

    def remote(self, **_: object):
        return lambda fn: SimpleNamespace(remote=lambda spec, log: Path(spec).stem)

    def wait(self, refs: list[str], num_returns: int, timeout: float) -> tuple[list[str], list[str]]:
        self.waits += 1
        if self.waits == 1:
            for name in refs:
                lock = self.study / "locks" / name / ".lock"
                lock.parent.mkdir(parents=True, exist_ok=True)
                lock.write_text(str(os.getpid()))
            return [], refs
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: str) -> tuple[int, float]:
        return 0, 1.0


def test_the_ray_launcher_says_when_each_unit_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agon_env.study.launchers import ray

    study = tmp_path / "study"
    specs = {name: study / "units" / f"{name}.json" for name in ("grpo-seed0", "agon-seed0")}
    for spec in specs.values():
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(json.dumps(dataclasses.asdict(Unit(name=spec.stem, eval=[], eval_dir=""))))
    old = study / "locks" / "agon-seed0" / ".lock"  # a lock left by an earlier run is no start
    old.parent.mkdir(parents=True)
    old.write_text("1")
    os.utime(old, (0, 0))
    monkeypatch.setitem(sys.modules, "ray", FakeRay(study))
    assert ray(specs, study / "logs") == {}
    said = [line.partition("] ")[2] for line in capsys.readouterr().out.splitlines()]
    assert said == [
        "grpo-seed0: started (ray)",
        "agon-seed0: started (ray)",
        "grpo-seed0: done in 1 s (ray)",
        "agon-seed0: done in 1 s (ray)",
    ]
