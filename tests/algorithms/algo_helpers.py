"""Scripted agents and a hand-checked batch shared by the algorithm tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agon_env.agents.scripted import ScriptedAgent

PROBLEMS = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 3 + 3?", "answer": "6"}]

# Four episodes (B = 2 problems × N = 2): episodes 0-1 on problem 0, 2-3 on problem 1.
DRAFTS = [
    "<summary>2+2</summary><answer>4</answer>",  # right, formatted: 2c + λφ = 2.5
    "<summary>guess</summary><answer>5</answer>",  # wrong, formatted: 0.5
    "<summary>3+3</summary><answer>6</answer>",  # 2.5
    "<summary>3+3</summary><answer>6</answer>",  # 2.5 -> drafter group 1 has no variance
]
CHALLENGES = [
    "<summary>ok</summary><answer>4</answer>",  # right, formatted, draft right
    "<summary>fixed</summary><answer>4</answer>",  # right, formatted, draft WRONG: conversion
    "no tags at all, 6",  # no answer block: wrong, format 0
    "<answer>6</answer>",  # right but no summary: format 0
]


def scripted(name: str, texts: Sequence[str]) -> tuple[ScriptedAgent, list[Mapping[str, Any]]]:
    """The agents layer's ScriptedAgent replaying ``texts`` in order, plus the observations it saw."""
    seen: list[Mapping[str, Any]] = []
    queue = list(texts)

    def answer(obs: Mapping[str, Any]) -> str:
        seen.append(obs)
        return queue.pop(0)

    return ScriptedAgent(name, answer), seen


def with_rewards(batch: Any, role: str, rewards: Sequence[float]) -> Any:
    """``batch`` with ``role``'s stream rewarded ``rewards`` in stream order (turns are frozen)."""
    from dataclasses import replace

    from agon_env.algorithms.rollout import RolloutBatch

    it = iter(rewards)
    episodes = [
        replace(e, turns=tuple(replace(t, reward=next(it)) if t.role == role else t for t in e.turns))
        for e in batch.episodes
    ]
    return RolloutBatch(batch.problem_indices, batch.num_generations, episodes)


def tiny_config(tmp_path: Any, **updates: Any) -> Any:
    """The trainer tests' config: the tiny model on ``test/parity-v0`` (``parity_env`` on the path)."""
    from agon_env.algorithms.validation import load_config

    base = {
        "model.name": "tiny",
        "imports": "parity_env",
        "env.id": "test/parity-v0",
        "batch_problems": 2,
        "grpo.num_generations": 4,
        "sampling.max_new_tokens": 4,
        "progress": False,
        "optim.lr": 1e-2,
        "out_dir": str(tmp_path / "run"),
        "threads": 1,
    }
    return load_config(None, {**base, **updates})


HERE = Path(__file__).parent
TINY_CLI = [  # the smallest `agon train` run: flags for a CLI test
    "--model",
    "tiny",
    "--batch-problems",
    "1",
    "--grpo.num-generations",
    "2",
    "--sampling.max-new-tokens",
    "8",
    "--heldout-problems",
    "0",
    "--no-progress",
    "--threads",
    "1",
]


def agon(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m agon_env.cli ARGS`` with this folder's test envs importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "agon_env.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
