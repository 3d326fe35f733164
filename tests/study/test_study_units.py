"""A study's units (their commands, their lock, when a run is trained) and its registration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agon_env.config import ConfigError
from agon_env.evaluation.report_file import EvalReport
from agon_env.study import registration
from agon_env.study.commands.study import main
from agon_env.study.plan import from_dict, load
from agon_env.study.results import check_eval
from agon_env.study.units import Lock, arm_unit, base_unit, trained

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "studies" / "smoke.yaml"


def test_a_unit_stays_locked_while_its_child_lives(tmp_path: Path) -> None:
    folder = tmp_path / "locks" / "agon-seed0"
    lock = Lock(folder)
    with lock as mine:
        assert mine and (folder / ".lock").read_text() == str(os.getpid())
        with Lock(folder) as second:
            assert not second  # a second study leaves the unit alone while this one runs it
        # A child that inherits the lock (as an orphaned trainer of a killed study would) keeps it.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(lock.fd,))
    try:
        with Lock(folder) as after_parent:
            assert not after_parent
    finally:
        child.kill()
        child.wait()
    with Lock(folder) as free:
        assert free  # nobody holds it any more: no stale lock to clean up by hand


def test_a_run_is_trained_once_its_last_step_and_its_adapters_are_written(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n{"step": 1}\n')
    assert not trained(tmp_path, 2)  # no curves.png: killed while saving its adapters
    (tmp_path / "curves.png").write_bytes(b"png")
    assert trained(tmp_path, 2) and not trained(tmp_path, 3)


def test_an_evaluation_of_another_task_or_size_is_refused(tmp_path: Path) -> None:
    plan = load(SMOKE)
    task = {"env": "agon/arith-v0", "task_kwargs": {"difficulty": 1, "size": 500}, "split": "test"}
    data = {**task, "test_problems": 6, "validation_problems": 3}

    def report(data: dict) -> EvalReport:
        return EvalReport.from_document({"data": data, "runs": []})

    check_eval(report(data), plan, {}, tmp_path)
    with pytest.raises(ValueError, match="difficulty"):
        check_eval(report(data), plan, {"difficulty": 2}, tmp_path)
    with pytest.raises(ValueError, match="test_problems"):
        check_eval(report(data | {"test_problems": 7}), plan, {}, tmp_path)


def test_each_unit_trains_its_arms_resolved_config_and_evaluates_its_run_alone(tmp_path: Path) -> None:
    plan = from_dict(
        yaml.safe_load(SMOKE.read_text())
        | {"arms": {"grpo": {"algo": "grpo"}, "agon-none": {"algo": "agon", "env.exchange": "none"}}}
    )
    none = arm_unit(plan, tmp_path, "agon-none", 1, {"difficulty": 2})
    assert none.config is not None and none.train == [
        "train",
        "--config",
        str(tmp_path / "units" / "agon-none-seed1.yaml"),
    ]
    cfg = none.config
    assert (cfg["algo"], cfg["seed"], cfg["env"]["exchange"]) == ("agon", 1, "none")
    assert cfg["env"]["kwargs"] == {"difficulty": 2, "size": 500}  # the calibrated keyword on the plan's
    assert cfg["out_dir"] == str(tmp_path / "runs" / "agon-none-seed1") and cfg["time_budget_min"] == 0
    assert none.eval[:2] == ["eval", str(tmp_path / "runs" / "agon-none-seed1")]
    methods = none.eval[none.eval.index("--methods") + 1 : none.eval.index("--split")]
    assert methods == ["standalone", "cascade"]  # sampling: the run's own (no --temperature)
    assert "--temperature" not in none.eval
    grpo = arm_unit(plan, tmp_path, "grpo", 0, {})
    methods = grpo.eval[grpo.eval.index("--methods") + 1 : grpo.eval.index("--split")]
    assert methods == ["standalone", "self-cascade"]  # one adapter: its two-stage reads its own draft
    base = base_unit(plan, tmp_path, {"difficulty": 2})
    assert base.eval[base.eval.index("--env-kwarg") + 1] == "difficulty=2" and "--temperature" in base.eval


def test_register_freezes_the_plan_and_run_refuses_a_changed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "study"
    assert main(["register", str(SMOKE), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith("registered: ") and f"git add {SMOKE}" in said
    reg = json.loads((out / "registration.json").read_text())
    assert reg["plan_sha256"] == load(SMOKE).sha256() and reg["prompts"] == registration.prompts_fingerprint()
    assert reg["package_version"] and reg["registered_at"].endswith("Z")
    assert reg["git_commit"] is None or len(reg["git_commit"].split("+")[0]) == 40
    assert main(["register", str(SMOKE), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("already registered: ")
    changed = tmp_path / "changed.yaml"
    changed.write_text(SMOKE.read_text().replace("seeds: [0, 1]", "seeds: [0, 1, 2]"))
    assert main(["run", str(changed), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "differs from the one registered" in err and "seeds changed" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["registration.json"]  # nothing else written
    assert main(["register", str(changed), "--out", str(out)]) == 2
    assert "differs from the plan registered in" in capsys.readouterr().err
    with pytest.raises(ConfigError):
        registration.check(load(changed), out)
    # A plan outside any git repository: no study commit, and no `git add` to advise (issue #46).
    elsewhere = tmp_path / "elsewhere"
    assert main(["register", str(changed), "--out", str(elsewhere)]) == 0
    said = capsys.readouterr().out
    assert "study commit none (the plan is in no git repository)" in said and "git add" not in said
    reg = json.loads((elsewhere / "registration.json").read_text())
    assert reg["git_commit"] is None and "package_commit" in reg


def test_importing_the_study_loads_neither_torch_nor_ray() -> None:
    names = (
        "commands.study",
        "plan",
        "units",
        "launchers",
        "analysis",
        "results",
        "tables",
        "verify",
        "registration",
    )
    modules = ", ".join(f"agon_env.study.{m}" for m in names)
    code = f"import sys; import {modules}; assert not {{'torch', 'ray'}} & set(sys.modules), 'loaded'"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_data_parallel_unit_trains_under_torchrun() -> None:
    from agon_env.study.units import train_command

    assert train_command(["--config", "u.yaml"], 1) is None  # one process: the unit's own
    cmd = train_command(["--config", "u.yaml"], 4)
    assert cmd is not None and cmd[1:7] == [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "4",
        "-m",
    ]
    assert cmd[7:] == ["agon_env.cli", "train", "--config", "u.yaml"]


def test_local_workers_run_units_side_by_side_each_on_its_own_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from agon_env.study import launchers

    running: set[str] = set()
    seen: list[tuple[str, str | None, int]] = []
    lock = threading.Lock()

    def fake(spec: Path, log: Path, device: str | None) -> tuple[int, float]:
        with lock:
            assert device not in running, "two units on one device at once"
            running.add(device or "")
            seen.append((spec.stem, device, len(running)))
        time.sleep(0.2)
        with lock:
            running.discard(device or "")
        return (3 if spec.stem == "bad" else 0), 0.2

    monkeypatch.setattr(launchers, "run_one", fake)
    specs = {name: tmp_path / f"{name}.json" for name in ("a", "b", "c", "bad")}
    failed = launchers.local(specs, tmp_path / "logs", workers=2, devices=["cuda:0", "cuda:1"])
    assert set(failed) == {"bad"}
    assert {d for _, d, _ in seen} == {"cuda:0", "cuda:1"} and max(n for *_, n in seen) == 2


def test_a_unit_on_cuda_n_sees_that_gpu_alone_as_cuda() -> None:
    from agon_env.study.units import Unit, child_env, device_flags

    unit = Unit("agon-seed0", ["eval"], "e", threads=2)
    env = child_env(unit, "cuda:3")
    assert (
        env["CUDA_VISIBLE_DEVICES"] == "3" and env["OMP_NUM_THREADS"] == "2" and env["HF_HUB_OFFLINE"] == "1"
    )
    assert device_flags("cuda:3") == ["--device", "cuda"]  # one spelling for train and eval
    assert device_flags(None) == [] and "CUDA_VISIBLE_DEVICES" not in child_env(unit, "cpu").keys() - {
        k for k in os.environ
    }


def test_a_registered_study_refuses_other_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = load(SMOKE)
    registration.register(plan, tmp_path)
    assert registration.check(plan, tmp_path) is not None
    monkeypatch.setattr(registration, "prompts_fingerprint", lambda: "0" * 16)
    with pytest.raises(ConfigError, match="prompts differ from those registered"):
        registration.check(plan, tmp_path)


def test_workers_lines_never_run_into_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    # print() writes a line's text and its newline apart, so two workers saying "started" at
    # once could print "[t] a: started[t] b: started" (CI saw it): each line is one write.
    import threading

    from agon_env.study.launchers import say

    def speak(who: int) -> None:
        for i in range(300):
            say(f"unit{who}-{i}: started")

    threads = [threading.Thread(target=speak, args=(w,)) for w in range(8)]
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(0.005)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 * 300
    whole = [line.startswith("[") and line.count("] ") == 1 and line.endswith(": started") for line in lines]
    assert all(whole)


def test_a_registered_preset_edited_afterwards_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plan names its preset; the registration freezes the preset's content too.
    monkeypatch.chdir(tmp_path)
    preset = tmp_path / "base.yaml"
    preset.write_text("steps: 4\n")
    plan = yaml.safe_load(SMOKE.read_text())
    plan["config"] = str(preset)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    out = tmp_path / "study"
    assert main(["register", str(path), "--out", str(out)]) == 0
    assert registration.check(load(path), out) is not None
    preset.write_text("steps: 40\n")
    with pytest.raises(ConfigError, match=r"the preset .* differs from the one registered"):
        registration.check(load(path), out)


def test_a_report_refuses_a_plan_edited_after_its_registration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "study"
    assert main(["register", str(SMOKE), "--out", str(out)]) == 0
    (out / "plan.yaml").write_text(SMOKE.read_text().replace("seeds: [0, 1]", "seeds: [0]"))
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "differs from the plan registered in" in err and len(err.strip().splitlines()) == 1
