"""Checkpoint pieces without a model: run folders, identity checks, atomic writes, sampler, schedule."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from agon_env.algorithms.checkpoint import (
    RunIdentity,
    load_checkpoint,
    prepare_run_dir,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from agon_env.algorithms.sampler import ProblemSampler
from agon_env.algorithms.schedules import lr_lambda
from agon_env.run_folder import CHECKPOINT, RunFolderError

ID = RunIdentity("tiny", ("agent_a", "agent_b"), 16, 32)


def _save(tmp_path, identity=ID, step=3):
    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.AdamW([p], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return save_checkpoint(
        tmp_path,
        step=step,
        identity=identity,
        adapters={"agent_a": {"w": p.data}},
        optimizers={"agent_a": opt},
        schedulers={"agent_a": sched},
        sampler={"epoch": 0, "position": 5},
        counters={"nan_skipped": 1},
    )


def test_existing_run_folder_is_refused(tmp_path):
    run = tmp_path / "run"
    prepare_run_dir(run, resume=False)
    with pytest.raises(RunFolderError, match="already exists: pass --resume"):
        prepare_run_dir(run, resume=False)
    with pytest.raises(RunFolderError, match="does not exist"):
        prepare_run_dir(tmp_path / "other", resume=True)


def test_round_trip_and_atomic(tmp_path):
    path = _save(tmp_path)
    assert path.name == CHECKPOINT
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was moved into place
    state = load_checkpoint(tmp_path, ID)
    assert state["step"] == 3 and state["sampler"]["position"] == 5 and state["counters"]["nan_skipped"] == 1


@pytest.mark.parametrize(
    ("other", "needle"),
    [
        (RunIdentity("smollm2-135m", ("agent_a", "agent_b"), 16, 32), "model is 'tiny' in the checkpoint"),
        (RunIdentity("tiny", ("agent_a",), 16, 32), "adapters is"),
        (RunIdentity("tiny", ("agent_a", "agent_b"), 8, 32), "lora_r is 16"),
    ],
)
def test_incompatible_checkpoint_is_refused(tmp_path, other, needle):
    _save(tmp_path)
    with pytest.raises(RunFolderError, match="incompatible checkpoint") as e:
        load_checkpoint(tmp_path, other)
    assert needle in str(e.value)


def test_resume_without_checkpoint(tmp_path):
    with pytest.raises(RunFolderError, match=r"no checkpoint\.pt"):
        load_checkpoint(tmp_path, ID)


def test_rng_state_round_trip():
    state = rng_state()
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == a


def test_sampler_resumes_the_same_stream():
    s = ProblemSampler(5, seed=1)
    first = s.take(3)
    state = s.state_dict()
    rest = s.take(9)
    t = ProblemSampler(5, seed=1)
    t.load_state_dict(state)
    assert t.take(9) == rest
    assert sorted(first + rest[:2]) == list(range(5))  # an epoch visits each problem once
    with pytest.raises(ValueError, match="not 6"):
        ProblemSampler(6, seed=1).load_state_dict(state)


def test_linear_schedule_with_warmup():
    f = lr_lambda(total=10, warmup_ratio=0.1, schedule="linear")
    # 1 warm-up step at 1/2, then linear decay (10 - s) / 9 from step 1
    assert [round(f(s), 4) for s in range(10)] == [0.5] + [round((10 - s) / 9, 4) for s in range(1, 10)]
    assert lr_lambda(4, 0.0, "constant")(3) == 1.0
