"""The time budget under a slowed clock: the held-out reserve is measured, and the run leaves at
most one step's time of its budget unused."""

from __future__ import annotations

import json
import time

from agon_env.algorithms.run import _heldout_fit, train
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import load_config, resolve
from agon_env.evaluation.evaluate import Evaluator
from agon_env.run_folder import read_metrics

STEP_S, METHOD_S, BUDGET_MIN = 200.0, 300.0, 60.0
"""A machine where every step takes 200 s more and each held-out row (base, each adapter) 300 s:
the tiny model's own seconds are noise next to them, even on a busy machine."""
SLACK_S = 0.05 * STEP_S
"""What the real seconds may add: the adapters sample a little more or less than the base."""


def test_a_slow_machine_spends_its_budget_to_within_one_step(tmp_path, monkeypatch):
    extra = [0.0]
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + extra[0])
    update, run = Trainer._update_all, Evaluator._run

    def slow_update(self, *args, **kwargs):
        extra[0] += STEP_S
        return update(self, *args, **kwargs)

    def slow_run(self, *args, **kwargs):
        extra[0] += METHOD_S
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "_update_all", slow_update)
    monkeypatch.setattr(Evaluator, "_run", slow_run)
    cfg = load_config(
        None,
        {
            "model.name": "tiny",
            "env.kwargs": {"difficulty": 1},
            "batch_problems": 2,
            "grpo.num_generations": 2,
            "sampling.max_new_tokens": 4,
            "progress": False,
            "threads": 1,
            "steps": 100,
            "heldout_problems": 10,
            "time_budget_min": BUDGET_MIN,
            "out_dir": str(tmp_path / "run"),
        },
    )
    started = time.perf_counter()
    run_dir = train(resolve(cfg))
    used = time.perf_counter() - started
    step_s = [r["time/step"] for r in read_metrics(run_dir)]
    # The whole check ran, on every problem planned: the reserve left it room.
    assert len(json.loads((run_dir / "heldout.json").read_text())["problem_ids"]) == 10
    budget = BUDGET_MIN * 60
    assert 5 <= len(step_s) < cfg.steps  # base first (300 s), then steps while one + 600 s fits
    assert used <= budget + SLACK_S, "the run overran its budget"
    assert budget - used <= max(step_s[-3:]) + SLACK_S, "more than one step's time was left unused"


def test_the_reserve_is_the_bases_measured_time_per_adapter_and_shrinks_the_check_to_fit():
    from pathlib import Path
    from types import SimpleNamespace

    from agon_env.evaluation.heldout import TrainedRunCheck

    check = TrainedRunCheck(Path("run"), "agon/arith-v0", {}, lambda n, a: None, ("agent_a", "agent_b"), 50)
    assert check.reserve() == 0.0  # nothing measured, nothing reserved
    check.base = SimpleNamespace(report={"seconds": 12.5})  # type: ignore[assignment]
    assert check.reserve() == 25.0
    # 50 problems for 100 s; 60 s left -> 30 of them; no reserve (no budget) -> all of them.
    assert _heldout_fit(50, 100.0, 60.0) == 30
    assert _heldout_fit(50, 100.0, 500.0) == 50 and _heldout_fit(50, 100.0, -5.0) == 0
    assert _heldout_fit(50, 0.0, -5.0) == 50
