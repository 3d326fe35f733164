"""Levers that only change how the work is computed change no reward or loss of a fixed-seed run.

Each lever is switched by a config key, a class attribute, or (for the levers kept on for
good once both sides measured the same: the stream prefix, prefix attention) by replacing
the code that does the work; a 3-step run of every algorithm plugin with the lever on and
one with it off must log the same rewards and losses (to round-off). The streams are cut into
several micro-batches so the levers have work to change.
"""

from __future__ import annotations

import math

import pytest
from algo_helpers import tiny_config

from agon_env.agents import attention
from agon_env.agents.hf_backend import HFBackend
from agon_env.algorithms import stream_prefix as SP
from agon_env.algorithms import update as U
from agon_env.algorithms.registry import algorithm_names
from agon_env.algorithms.run import train
from agon_env.algorithms.validation import resolve
from agon_env.run_folder import read_metrics

LEVERS = {
    "stream_prefix": {U: ("stream_prefix", SP.stream_prefix, lambda *_a, **_k: None)},
    "token_micro_batches": {"grpo.micro_batch_tokens": (24, None)},
    "prefix_attention": {HFBackend: ("_prefix_once", HFBackend._prefix_once, lambda _self: False)},
}
"""Lever -> its switch, on and off: a config key, or an attribute of a class or module."""


def _split_by_tokens(args: tuple, result: list) -> bool:
    lengths, rows = args[0], args[1]
    return len(result) > -(-len(lengths) // rows)  # more chunks than the row cap alone makes


RAN = {
    "stream_prefix": (SP.StreamPrefix, "backward", None),
    "token_micro_batches": (U, "micro_batches", _split_by_tokens),
    "prefix_attention": (attention, "prefix_attention", None),
}
"""Lever -> a function that runs (or, with a predicate on its arguments and result, does
something) only when the lever has work: spied, so the test proves something."""

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
    return read_metrics(train(resolve(cfg)))


def _switch(monkeypatch, lever: str, on: bool) -> dict:
    updates = {}
    for key, setting in LEVERS[lever].items():
        if isinstance(key, str):
            updates[key] = setting[0 if on else 1]
        else:
            monkeypatch.setattr(key, setting[0], setting[1 if on else 2])
    return updates


@pytest.mark.parametrize("lever", list(LEVERS))
@pytest.mark.parametrize("algo", algorithm_names())
def test_a_lever_changes_no_reward_or_loss(tmp_path, parity_on_path, monkeypatch, algo, lever):
    used = []
    owner, name, has_work = RAN[lever]
    method = getattr(owner, name)

    def spy(*a, **k):
        result = method(*a, **k)
        if has_work is None or has_work(a, result):
            used.append(1)
        return result

    monkeypatch.setattr(owner, name, spy)
    with_lever = _run(tmp_path, algo, "on", _switch(monkeypatch, lever, True))
    assert used, f"{lever} never ran: the test would prove nothing"
    without = _run(tmp_path, algo, "off", _switch(monkeypatch, lever, False))
    assert len(with_lever) == len(without) == 3
    for a, b in zip(with_lever, without, strict=True):
        keys = {k for k in b if k.startswith(COMPARED)}
        assert keys == {k for k in a if k.startswith(COMPARED)} and any(k.startswith("loss/") for k in keys)
        for k in sorted(keys):
            if isinstance(b[k], float) and math.isfinite(b[k]):
                assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), (a["step"], k)


def test_merge_buffers_are_freed_after_each_merged_block():
    from agon_env.agents import LoraSpec, SharedBase

    base = SharedBase.from_source("tiny")
    base.add_adapter("agent_a", LoraSpec(init_b_std=0.01))
    with base.sampling("agent_a"):
        assert base._merge._buffers  # the merged copy exists while sampling
    assert not base._merge._buffers
