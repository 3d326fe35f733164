"""An Agon step on a code env: completions go through the sandbox via the env, not the trainer."""

from __future__ import annotations

import shutil

import pytest

from agon_env.algorithms.cli_train import main
from agon_env.algorithms.run_log import read_metrics


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap not installed (scripts/setup.sh installs it)"
)
def test_agon_step_on_humaneval_with_the_tiny_model(tmp_path):
    run = tmp_path / "he"
    argv = ["--model", "tiny", "--algo", "agon", "--env", "agon/humaneval-v0", "--env.kwargs", "limit=3"]
    argv += ["--batch-problems", "2", "--n", "2", "--sampling.max-new-tokens", "8", "--steps", "1"]
    argv += ["--no-progress", "--threads", "1", "--out-dir", str(run)]
    assert main(argv) == 0
    (record,) = read_metrics(run)
    assert record["step"] == 0 and record["time/scoring"] > 0
    assert 0 <= record["acc/drafter"] <= 1 and 0 <= record["groups_dropped"] <= 1
