"""Where and in what a finished run's base loads, for every consumer (eval, probe, answer, serve):
one device rule (``auto``: this machine's CUDA, else its CPU -- as training reads it, never the
training machine's device) and the run's ``model.dtype`` read through the one dtype rule."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from serving_run import write_tiny_run

from agon_env.evaluation.runs import PolicyLoader, settings_for
from agon_env.registry import make
from agon_env.resolved import dtype_on
from agon_env.run_folder import load_resolved, write_resolved


@pytest.mark.parametrize(
    ("setting", "device", "loaded"),
    [
        ("auto", "cpu", "float32"),  # bf16 matmuls run ~300x slower on these cores
        ("auto", "cuda", "bfloat16"),
        ("bfloat16", "cpu", "bfloat16"),  # asked for: honoured
        ("float16", "cuda", "float16"),
        ("float32", "cuda", "float32"),
    ],
)
def test_the_dtype_rule(setting: str, device: str, loaded: str) -> None:
    assert dtype_on(setting, device) == loaded


def _run(tmp_path: Path, dtype: str) -> Path:
    run = write_tiny_run(tmp_path / dtype)
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("lora_alpha: 8}", f"lora_alpha: 8, dtype: {dtype}}}"))
    return run


@pytest.mark.parametrize(("dtype", "loaded"), [("bfloat16", torch.bfloat16), ("auto", torch.float32)])
def test_a_run_is_evaluated_in_its_own_dtype(tmp_path: Path, dtype: str, loaded: torch.dtype) -> None:
    run = _run(tmp_path, dtype)
    resolved = load_resolved(run)
    assert resolved.config.model.dtype == dtype
    task = make(resolved.env_id, **resolved.task_kwargs).unwrapped.task
    policies = PolicyLoader("cpu").run_policies(run, settings_for(resolved, task))
    base = policies.adapters["agent_a"].base
    assert next(base.base_model.parameters()).dtype == loaded
    # another dtype samples other completions: its identity (the cache key and seed) says so
    assert ("@bfloat16" in policies.identities["agent_a"]) == (loaded == torch.bfloat16)


def test_a_run_trained_on_a_gpu_is_served_on_this_machine(tmp_path: Path) -> None:
    from agon_env.serving.cascade import Cascade

    run = write_tiny_run(tmp_path / "gpu-run", direction="agent_a>agent_b")
    trained = dataclasses.replace(load_resolved(run), device="cuda", dtype="bfloat16")
    write_resolved(run, trained)  # what a run trained on a GPU with dtype auto records
    cascade = Cascade.from_run(run, engine="hf")  # no --device: this machine's (the CPU here)
    param = next(cascade.base.base_model.parameters())
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert param.device.type == expected and param.dtype == (
        torch.float32 if expected == "cpu" else torch.bfloat16
    )
