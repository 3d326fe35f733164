"""``scripts/gpu_check.sh``: one line without a GPU; its Python half end to end on CPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_gpu_check_refuses_in_one_line_without_a_gpu():
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver")
    cmd = ["bash", str(REPO / "scripts/gpu_check.sh")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpu_check: no NVIDIA driver")


@pytest.mark.slow
def test_gpu_check_dry_run_on_cpu_prints_its_json_line(tmp_path):
    cmd = [
        sys.executable,
        str(REPO / "scripts/gpu_check.py"),
        "--device",
        "cpu",
        "--backend",
        "hf",
        "--steps",
        "2",
        "--batch-problems",
        "2",
        "--n",
        "4",
        "--max-new-tokens",
        "24",
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["steps"] == 2 and result["backend"] == "hf" and result["batch"] == "2x4"
    assert result["step_s"] > 0 and result["rollout_tok_s"] > 0 and result["eval_s"] > 0
    assert (tmp_path / "run" / "eval" / "eval.json").is_file()


def test_same_metrics_ignores_timings_and_finds_a_changed_loss(tmp_path):
    rows = [{"step": 0, "loss": 0.25, "time/step": 1.0}, {"step": 1, "loss": 0.5, "time/step": 2.0}]
    for side, loss, secs in (("before", 0.5, 2.0), ("same", 0.5 + 1e-9, 9.0), ("changed", 0.51, 2.0)):
        (tmp_path / side / "agon").mkdir(parents=True)
        lines = [rows[0], {**rows[1], "loss": loss, "time/step": secs}]
        (tmp_path / side / "agon" / "metrics.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    cmd = [sys.executable, str(REPO / "scripts/same_metrics.py"), str(tmp_path / "before")]
    same = subprocess.run([*cmd, str(tmp_path / "same")], capture_output=True, text=True, timeout=60)
    assert same.returncode == 0 and "agon same" in same.stdout
    changed = subprocess.run([*cmd, str(tmp_path / "changed")], capture_output=True, text=True, timeout=60)
    assert changed.returncode == 1 and "(1, 'loss', 0.5, 0.51)" in changed.stdout


def test_revisits_follows_the_run_folder_and_counts_returns_to_a_module_it_left(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("revisits", REPO / "scripts" / "revisits.py")
    revisits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(revisits)
    from agon_env.run_folder import RunFolder
    from agon_env.runtime import adapter_folders

    def call():
        RunFolder(tmp_path)
        RunFolder(tmp_path / "elsewhere")  # not the run: not followed
        adapter_folders(tmp_path)  # runtime, which hands it to run_folder again
        return RunFolder(tmp_path).eval_dir

    path = revisits.follow(tmp_path, call)
    assert path == ["agon_env.run_folder", "agon_env.runtime", "agon_env.run_folder"]
    assert revisits.revisits(path) == 1 and revisits.revisits(["a", "b", "a", "c", "b"]) == 2
