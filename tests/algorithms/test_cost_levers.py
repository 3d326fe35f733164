"""Levers that only change how the work is computed change no reward or loss of a fixed-seed run.

Each lever has a config switch; a 3-step run of every algorithm plugin with the lever on and
one with it off must log the same rewards and losses (to round-off). The streams are cut into
several micro-batches so the levers have work to change.
"""

from __future__ import annotations

import math

import pytest
from algo_helpers import tiny_config

from agon_env.algorithms import stream_prefix as SP
from agon_env.algorithms.registry import algorithm_names
from agon_env.algorithms.run import train
from agon_env.algorithms.run_log import read_metrics

LEVERS = {"stream_prefix": ("grpo.stream_prefix", True, False)}
"""Lever name -> (config key, on, off)."""

COMPARED = ("reward", "loss/", "grad_norm/", "acc/", "format_rate")
"""Metrics that must not move: what was sampled and scored, and what the update computed."""


def _run(tmp_path, algo: str, name: str, updates: dict) -> list[dict]:
    cfg = tiny_config(
        tmp_path / name,
        algo=algo,
        steps=3,
        heldout_problems=0,
        time_budget_min=0,
        samples_per_role=0,
        **{"grpo.micro_batch": 3, **updates},
    )
    return read_metrics(train(cfg))


@pytest.mark.parametrize("lever", list(LEVERS))
@pytest.mark.parametrize("algo", algorithm_names())
def test_a_lever_changes_no_reward_or_loss(tmp_path, parity_on_path, monkeypatch, algo, lever):
    key, on, off = LEVERS[lever]
    used = []
    backward = SP.StreamPrefix.backward
    monkeypatch.setattr(SP.StreamPrefix, "backward", lambda self: used.append(1) or backward(self))
    with_lever = _run(tmp_path, algo, "on", {key: on})
    assert used, f"{lever} never ran: the test would prove nothing"
    without = _run(tmp_path, algo, "off", {key: off})
    assert len(with_lever) == len(without) == 3
    for a, b in zip(with_lever, without, strict=True):
        keys = {k for k in b if k.startswith(COMPARED)}
        assert keys == {k for k in a if k.startswith(COMPARED)} and any(k.startswith("loss/") for k in keys)
        for k in sorted(keys):
            if isinstance(b[k], float) and math.isfinite(b[k]):
                assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), (a["step"], k)
