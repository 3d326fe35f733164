"""The paper's recipe, offline: ``configs/paper-qwen3-0.6b-deepmath.yaml`` exactly as a GPU
user runs it, with only the model (``tiny-qwen3``), the step count, the batch sizes and the
response budget shrunk, and ``env.kwargs.path`` pointing at a DeepMath-format fixture --
through ``agon train`` and then ``agon eval``, on CPU.

The HF variant runs in the default suite; the vLLM variant (``-m vllm``) keeps the preset's
backend too (``agon train --backend vllm``'s own test: rollouts in vLLM, updates in torch, their
log-probs agreeing), and a second vLLM run forces a stale adapter to show the on-policy guard stop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from agon_env.agents.prompt_families import CHALLENGER_EXAMPLES, DRAFTER_EXAMPLES
from agon_env.envs.tasks.fixtures import FIXTURE_DROPPED, write_deepmath_fixture
from agon_env.run_folder import read_metrics

PRESET = "paper-qwen3-0.6b-deepmath"
SHRUNK = [
    "--model",
    "tiny-qwen3",
    "--steps",
    "2",
    "--batch-problems",
    "2",
    "--n",
    "4",
    "--sampling.max-new-tokens",
    "72",
    "--heldout-problems",
    "2",
]
# 72 tokens: the taught format ends at ~55; at 48 every completion was cut before </answer>, so every
# group had one reward and was dropped, and whether a step updated at all was down to float round-off.
ON_CPU = ["--model.device", "cpu"]  # the preset says cuda


def _agon(python: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [python, "-c", "import sys; from agon_env.cli import main; sys.exit(main())", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=env)


def _arithmetic_text() -> list[str]:
    return [q for q, _ in DRAFTER_EXAMPLES] + [q for q, *_ in CHALLENGER_EXAMPLES]


def _check_run(run: Path, fixture: Path) -> list[dict]:
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    # The preset's recipe survived the shrinking.
    assert cfg["model"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert cfg["model"]["gradient_checkpointing"] is True and cfg["model"]["max_seq_len"] == 12288
    assert cfg["sampling"]["stop_after"] == "</think>" and cfg["sampling"]["temperature"] == 1.0
    assert cfg["env"]["kwargs"] == {"min_difficulty": 8, "drop_binary": True, "path": str(fixture)}
    assert cfg["prompts"]["few_shot"] is False and cfg["grpo"]["num_generations"] == 4
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert {s["role"] for s in samples} == {"drafter", "challenger"}
    for s in samples:
        assert not any(q in s["prompt"] for q in _arithmetic_text()), "arithmetic worked examples leaked"
        assert "a number or a LaTeX expression" in s["prompt"] or "rival's draft summary" in s["prompt"]
        # Thinking on: the generation prompt is open, not Qwen3's pre-filled empty thought block.
        assert s["prompt"].endswith("<|im_start|>assistant\n")
        assert not any(q in s["prompt"] for q in FIXTURE_DROPPED)  # the preset's filters applied
    records = read_metrics(run)
    assert [r["step"] for r in records] == [0, 1]
    assert any(k.startswith("loss/") for r in records for k in r), "no update ran: every group dropped"
    assert (run / "adapters" / "agent_a").is_dir() and (run / "adapters" / "agent_b").is_dir()
    return records


def _check_eval(python: str, run: Path) -> None:
    proc = _agon(python, "eval", str(run), "--problems", "6", "--val-problems", "3", "--no-cache", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((run / "eval" / "eval.json").read_text())
    data = report["data"]
    assert data["env"] == "agon/deepmath-v0" and data["test_problems"] == 6
    assert data["disjoint"]["test_and_training"] == {str(run): 0}  # held out by content
    assert report["prompts"] == {"family": "math", "few_shot": False}
    assert report["sampling"]["stop_after"] == "</think>"
    assert report["runs"][0]["selection"]["chosen"].startswith("cascade:")


@pytest.mark.slow
def test_paper_preset_trains_and_evaluates_offline_hf(tmp_path):
    fixture = write_deepmath_fixture(tmp_path / "deepmath.parquet")
    run = tmp_path / "run"
    argv = [
        "train",
        "--config",
        PRESET,
        *SHRUNK,
        *ON_CPU,
        "--model.backend",
        "hf",
        "--env.kwargs",
        f"path={fixture}",
        "--out-dir",
        str(run),
        "--no-progress",
    ]
    proc = _agon(sys.executable, *argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _check_run(run, fixture)
    kls = [v for r in records for k, v in r.items() if k.startswith("onpolicy/kl/") and v is not None]
    assert kls and max(kls) < 1e-4  # the HF sampler is the trainer's own forward
    _check_eval(sys.executable, run)


def _vllm_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "VLLM_CACHE_ROOT": os.environ.get("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))}


@pytest.mark.vllm
@pytest.mark.slow
def test_paper_preset_trains_and_evaluates_offline_vllm(tmp_path, vllm_interpreter):
    fixture = write_deepmath_fixture(tmp_path / "deepmath.parquet")
    run = tmp_path / "run"
    argv = [
        "train",
        "--config",
        PRESET,
        *SHRUNK,
        *ON_CPU,
        "--env.kwargs",
        f"path={fixture}",
        "--out-dir",
        str(run),
        "--no-progress",
    ]
    proc = _agon(vllm_interpreter, *argv, env=_vllm_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert yaml.safe_load((run / "config.yaml").read_text())["model"]["backend"] == "vllm"
    records = _check_run(run, fixture)
    kls = [v for r in records for k, v in r.items() if k.startswith("onpolicy/kl/") and v is not None]
    # vLLM's own kernels against the trainer's forward, both fp32: close, well under the guard, and
    # the importance weights near 1 (adapters re-published to the engine after every update)
    assert kls and max(kls) < 1e-3
    weights = [v for r in records for k, v in r.items() if k.startswith("onpolicy/is_weight_mean/")]
    assert weights and all(abs(w - 1) < 0.05 for w in weights if w is not None)
    # the end-of-run held-out check went through the same engine
    heldout = json.loads((run / "heldout.json").read_text())
    assert heldout["policies"] and all(len(p["outcomes"]) == 2 for p in heldout["policies"].values())
    _check_eval(sys.executable, run)


STALE_SYNC = textwrap.dedent(
    '''
    """Test-only: the engine keeps serving each adapter's first published weights."""
    from agon_env.agents.vllm_backend import VLLMBackend

    _publish = VLLMBackend.sync

    def _stale(self, name):
        if name in self.requests:
            self.versions[name] += 1  # the trainer believes v1, v2, ... went out
            return self.requests[name]
        return _publish(self, name)

    VLLMBackend.sync = _stale
    '''
)


@pytest.mark.vllm
@pytest.mark.slow
def test_a_stale_adapter_in_vllm_stops_the_run_naming_it(tmp_path, vllm_interpreter, vllm_in_process):
    (tmp_path / "stale_sync.py").write_text(STALE_SYNC)
    fixture = write_deepmath_fixture(tmp_path / "deepmath.parquet")
    run = tmp_path / "run"
    # A large learning rate, so one update moves the policy far past the sampler's round-off.
    argv = [
        "train",
        "--config",
        PRESET,
        *SHRUNK,
        *ON_CPU,
        "--steps",
        "6",
        "--lr",
        "0.05",
        "--imports",
        "stale_sync",
        "--env.kwargs",
        f"path={fixture}",
        "--out-dir",
        str(run),
        "--no-progress",
    ]
    env = {
        **_vllm_env(tmp_path),
        **vllm_in_process,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    proc = _agon(vllm_interpreter, *argv, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    # vLLM's multiprocessing may add a resource_tracker warning at interpreter exit: look for our line.
    ours = [line for line in proc.stderr.splitlines() if line.startswith("agon train: ")]
    assert ours, proc.stderr[-3000:]
    last = ours[-1]
    assert last.startswith("agon train: step ") and "on-policy guard" in last, last
    assert "engine version v" in last and ("'agent_a'" in last or "'agent_b'" in last)
    assert len(read_metrics(run)) >= 1  # the steps before the stale sync are kept (resumable)
