"""One pair of adapters evaluates the same in any process and from any folder (issue 47, item 1).

On 18b19e3 two processes under different ``PYTHONHASHSEED`` wrote the same weights with
``adapter_config.json``'s ``target_modules`` in another (set) order, and ``agon eval`` seeded each
policy's sampling with its run folder's path: the same adapters in two folders sampled different
completions. The tiny model's answers are all wrong, so the outcome lists alone would agree
trivially: the sampled completions (their lengths, per seed and per method) are compared too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TRAIN = [
    "train",
    "--model",
    "tiny",
    "--env",
    "agon/arith-v0",
    "--env.kwargs",
    "difficulty=1",
    "--batch-problems",
    "2",
    "--grpo.num-generations",
    "2",
    "--sampling.max-new-tokens",
    "16",
    "--heldout-problems",
    "0",
    "--no-progress",
    "--threads",
    "1",
    "--steps",
    "1",
]
EVAL = [
    "--methods",
    "standalone",
    "--split",
    "test",
    "--problems",
    "12",
    "--val-problems",
    "0",
    "--seeds",
    "0",
    "1",
    "--max-new-tokens",
    "16",
    "--quiet",
]


def agon(*argv: str, hash_seed: int) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": str(hash_seed)}
    cmd = [sys.executable, "-m", "agon_env.cli", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def sampled(eval_dir: Path) -> dict:
    """What each method sampled and scored: outcomes (pass@1 per seed) and completion lengths."""
    run = json.loads((eval_dir / "eval.json").read_text())["runs"][0]
    keep = ("pass@1", "per_seed", "mean_length", "mean_final_length", "format_rate")
    return {m: {k: r.get(k) for k in keep} for m, r in run["methods"].items()}


def test_the_same_unit_in_two_processes_and_folders_writes_and_samples_the_same(tmp_path):
    runs = {h: tmp_path / f"run-hash{h}" for h in (1, 2)}
    for h, run in runs.items():
        agon(*TRAIN, "--out-dir", str(run), hash_seed=h)
    for seat in ("agent_a", "agent_b"):
        one, two = (folder_bytes(run / "adapters" / seat) for run in runs.values())
        assert one.keys() == two.keys() and "adapter_config.json" in one
        assert [k for k in one if one[k] != two[k]] == []  # byte for byte, config included
    evals = {h: tmp_path / f"eval-hash{h}" for h in runs}
    for h, run in runs.items():
        agon("eval", str(run), *EVAL, "--out", str(evals[h]), hash_seed=h + 10)
    assert sampled(evals[1]) == sampled(evals[2])
