"""``studies/smoke.yaml`` end to end: run with two workers, kill -9 mid-unit and resume, Ray.

The tiny random model at seconds per unit: the numbers are meaningless; the pipeline, the
resumption and the results file are what is tested. A resumed study's outcome lists and
training losses equal an uninterrupted one's (each unit is a resolved run, resumed exactly).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "studies" / "smoke.yaml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def agon(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "agon_env.cli", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd=ROOT, **kw)  # type: ignore[call-overload]


def outcomes(out: Path) -> dict:
    """Every unit's 0/1 outcome lists (final answers and drafts), by unit and method."""
    o = json.loads((out / "results.json").read_text())["outcomes"]
    units = {f"{arm}-seed{s}": r for arm, seeds in o["arms"].items() for s, r in seeds.items()}
    if o["base"]:
        units["base"] = o["base"]
    return {name: (r["outcomes"], r["first_outcomes"]) for name, r in units.items()}


def sampled(out: Path) -> dict:
    """What every unit's evaluation sampled: per method, pass@1 per seed and the completions'
    lengths. The tiny model's outcomes are all 0, so equal outcome lists alone say little; equal
    lengths mean the same completions were sampled (issue 47: the run folder's path seeded them)."""
    keep = ("per_seed", "mean_length", "mean_final_length", "format_rate")
    found = {}
    for path in sorted((out / "eval").glob("*/eval.json")):
        for run in json.loads(path.read_text())["runs"]:
            found[path.parent.name] = {m: {k: r.get(k) for k in keep} for m, r in run["methods"].items()}
    return found


def adapters(out: Path, unit: str) -> dict[str, bytes]:
    folder = out / "runs" / unit / "adapters"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def losses(out: Path, unit: str) -> list[float]:
    rows = [json.loads(line) for line in (out / "runs" / unit / "metrics.jsonl").read_text().splitlines()]
    return [r.get("loss") for r in rows]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke study registered, run uninterrupted with two workers, reported and verified."""
    out = tmp_path_factory.mktemp("smoke") / "ref"
    assert agon("study", "register", str(SMOKE), "--out", str(out)).returncode == 0
    done = agon("study", "run", str(SMOKE), "--out", str(out), "--workers", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out / "study.log").write_text(done.stdout)
    return out


def test_the_smoke_study_runs_two_units_at_once_and_verifies(reference: Path) -> None:
    doc = json.loads((reference / "results.json").read_text())
    assert doc["complete"] and set(doc["outcomes"]["arms"]) == {"grpo", "agon"}
    assert set(doc["outcomes"]["arms"]["agon"]) == {"0", "1"} and doc["outcomes"]["base"]
    run = doc["outcomes"]["arms"]["agon"]["0"]
    assert run["score_errors"] == {m: 0 for m in run["outcomes"]} and set(run["score_timeouts"]) == set(
        run["outcomes"]
    )
    registered = doc["registration"]["registered_at"]
    assert all(
        r["written_at"] >= registered for seeds in doc["outcomes"]["arms"].values() for r in seeds.values()
    )
    assert doc["hashes"]["plan_sha256"] == doc["registration"]["plan_sha256"]
    assert "| agon − grpo, standalone |" in (reference / "report.md").read_text()
    assert (reference / "accuracy_vs_length.png").stat().st_size > 0
    assert agon("study", "verify", str(reference / "results.json")).returncode == 0
    # Re-running the finished study runs nothing.
    again = agon("study", "run", str(SMOKE), "--out", str(reference), "--no-report")
    assert again.returncode == 0 and "0 of 5" not in again.stdout and "running 0" in again.stdout


def test_two_units_overlap_under_two_workers(reference: Path) -> None:
    """The launcher started a second unit before the first ended (its log, in order)."""
    lines = (reference / "study.log").read_text().splitlines()
    events = [line.split("] ", 1)[1] for line in lines if line.startswith("[") and ": " in line]
    first_done = next(i for i, e in enumerate(events) if ": done in" in e)
    assert sum(e.endswith(": started") for e in events[:first_done]) == 2


def test_a_study_killed_mid_unit_resumes_to_the_uninterrupted_outcomes(
    reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "killed"
    assert agon("study", "register", str(SMOKE), "--out", str(out)).returncode == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "agon_env.cli",
        "study",
        "run",
        str(SMOKE),
        "--out",
        str(out),
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    killed_in = None
    deadline = time.monotonic() + 600
    while killed_in is None and time.monotonic() < deadline and proc.poll() is None:
        for run in (out / "runs").glob("*") if (out / "runs").is_dir() else []:
            if (run / "checkpoint.pt").is_file() and not (run / "curves.png").is_file():
                os.killpg(proc.pid, signal.SIGKILL)  # the study, its workers and their trainers
                killed_in = run.name
                break
        time.sleep(0.05)
    proc.wait()
    assert killed_in is not None, "no unit was caught between its first checkpoint and its end"
    assert not (out / "eval" / killed_in / "eval.json").is_file() and not (out / "results.json").is_file()
    resumed = agon(*cmd[3:])
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resuming from its last checkpoint" in (out / "logs" / f"{killed_in}.log").read_text()
    assert f"{killed_in}: started (resuming from step " in resumed.stdout
    assert outcomes(out) == outcomes(reference)
    assert sampled(out) == sampled(reference) and sampled(out)
    assert adapters(out, killed_in) == adapters(reference, killed_in)
    same = agon("study", "diff", str(reference / "results.json"), str(out / "results.json"))
    assert same.returncode == 0, same.stdout
    assert losses(out, killed_in) == losses(reference, killed_in)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (the study-ray extra)")
def test_the_ray_launcher_runs_units_as_ray_tasks(reference: Path, tmp_path: Path) -> None:
    """One arm and seed of the smoke plan on a local Ray cluster: the same outcomes as locally."""
    plan = yaml.safe_load(SMOKE.read_text())
    plan["arms"], plan["seeds"], plan["comparisons"] = {"grpo": {"algo": "grpo"}}, [0], []
    plan["evaluation"]["base_methods"] = []
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(plan))
    out = tmp_path / "ray"
    done = agon("study", "run", str(path), "--out", str(out), "--launcher", "ray")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "grpo-seed0: done in" in done.stdout and "(ray)" in done.stdout
    assert outcomes(out)["grpo-seed0"] == outcomes(reference)["grpo-seed0"]
    assert sampled(out)["grpo-seed0"] == sampled(reference)["grpo-seed0"]
    assert adapters(out, "grpo-seed0") == adapters(reference, "grpo-seed0")
    same = agon("study", "diff", str(reference), str(out), "--unit", "grpo-seed0")
    assert same.returncode == 0, same.stdout
