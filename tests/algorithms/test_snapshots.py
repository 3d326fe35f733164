"""``--snapshot-every K`` keeps each adapter's LoRA weights at every K-th step, and a run killed
with SIGKILL and resumed keeps the same snapshots as one never killed (issue 61, item 1).

On 71a440e there is no such flag: every test here fails at the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from agon_env.algorithms.commands.train import main
from agon_env.run_folder import RunFolder

TINY = ["--model", "tiny", "--imports", "parity_env", "--env", "test/parity-v0", "--batch-problems", "2"]
TINY += ["--n", "2", "--sampling.max-new-tokens", "4", "--no-progress", "--threads", "1"]
TINY += ["--heldout-problems", "0", "--time-budget-min", "0", "--divergence-kl-rollouts", "0"]
TINY += ["--report-to", "none"]
WEIGHTS = "adapter_model.safetensors"

pytestmark = pytest.mark.usefixtures("parity_on_path")


def _weights(folder: Path) -> dict:
    return load_file(str(folder / WEIGHTS))


def _same(a: Path, b: Path) -> bool:
    x, y = _weights(a), _weights(b)
    return x.keys() == y.keys() and all(x[k].equal(y[k]) for k in x)


def test_snapshots_every_k_are_peft_folders_counted_in_the_summary(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*TINY, "--steps", "4", "--snapshot-every", "2", "--out-dir", str(run)]) == 0
    folder = RunFolder(run)
    assert folder.snapshot_steps() == [2, 4]
    assert folder.snapshot(2, "agent_a") == run / "snapshots" / "step-000002" / "agent_a"
    assert all(folder.snapshot_adapters(s) == ["agent_a", "agent_b"] for s in (2, 4))
    # The last step's snapshot is the run's final adapters; the earlier one is not.
    assert _same(folder.snapshot(4, "agent_a"), folder.adapter("agent_a"))
    assert not _same(folder.snapshot(2, "agent_a"), folder.snapshot(4, "agent_a"))
    out = capsys.readouterr().out
    assert "snapshots: 4 (2 steps: 2, 4)" in out and "MiB each" in out


KILLER = """
import os, signal, sys
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.commands.train import main
real, calls = Trainer.train_step, []
def killed_at_the_fourth(self):
    calls.append(1)
    if len(calls) == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self)
Trainer.train_step = killed_at_the_fourth
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_killed_with_sigkill_and_resumed_keeps_the_same_snapshots(tmp_path):
    flags = [*TINY, "--steps", "5", "--snapshot-every", "1"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main([*flags, "--out-dir", str(whole)]) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    r = subprocess.run(
        [sys.executable, "-c", KILLER, *flags, "--out-dir", str(killed)],
        env=env,
        timeout=600,
        capture_output=True,
    )
    assert r.returncode == -9, r.stderr[-2000:]
    assert RunFolder(killed).snapshot_steps() == [1, 2, 3]
    assert main(["--out-dir", str(killed), "--resume"]) == 0
    assert RunFolder(killed).snapshot_steps() == [1, 2, 3, 4, 5]
    for step in range(1, 6):
        for name in ("agent_a", "agent_b"):
            assert _same(RunFolder(killed).snapshot(step, name), RunFolder(whole).snapshot(step, name))


def test_a_snapshot_of_a_rolled_back_step_is_written_again_and_only_for_those_adapters(tmp_path):
    """``resave_rolled_back`` (what ``agon train`` hands ``Trainer.on_rollback``): the snapshot of
    the undone step is rewritten with the weights now live for the adapters rolled back; another
    adapter's snapshot of that step stays as written, and an adapter with none gets none."""
    import torch

    from agon_env.agents import LoraSpec, SharedBase
    from agon_env.algorithms.snapshots import resave_rolled_back, save_snapshots

    base = SharedBase.from_source("tiny")
    for name in ("agent_a", "agent_b", "agent_c"):
        base.add_adapter(name, LoraSpec(init_b_std=0.01))
    run = tmp_path / "run"
    save_snapshots(base, ["agent_a", "agent_b"], run, 1)
    folder = RunFolder(run)
    first = {n: _weights(folder.snapshot(1, n)) for n in ("agent_a", "agent_b")}
    with torch.no_grad():
        for name in ("agent_a", "agent_b"):
            for p in base.parameters(name):
                p.mul_(0.5)
    resave_rolled_back(base, ["agent_a", "agent_c"], run, 1)
    again = _weights(folder.snapshot(1, "agent_a"))
    assert all(torch.allclose(again[k], first["agent_a"][k] * 0.5) for k in again)
    assert _weights(folder.snapshot(1, "agent_b")).keys() == first["agent_b"].keys()
    assert all(_weights(folder.snapshot(1, "agent_b"))[k].equal(v) for k, v in first["agent_b"].items())
    assert folder.snapshot_adapters(1) == ["agent_a", "agent_b"]
