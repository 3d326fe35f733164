"""Non-finite values: refused at the door, caught after each update, never saved."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from algo_helpers import TINY_CLI, tiny_config, with_rewards

from agon_env.algorithms.commands.train import main
from agon_env.algorithms.rollout import rollout
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import resolve

pytestmark = pytest.mark.usefixtures("parity_on_path")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--lr", "inf"], "optim.lr = inf: use a finite number"),
        (["--grpo.max-grad-norm", "nan"], "grpo.max_grad_norm = nan: use a finite number"),
        (["--temperatures", "agent_a=.inf"], "temperatures.agent_a = inf: use a finite number"),
        (["--time-budget-min", "inf"], "time_budget_min = inf: use a finite number"),
    ],
)
def test_a_non_finite_option_is_refused_before_anything_loads(tmp_path: Path, capsys, flags, said) -> None:
    assert main([*TINY_CLI, "--model", "no/such-model", *flags, "--out-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and not (tmp_path / "r").exists()


def _poisoned(tr: Trainer, adapter: str) -> None:
    """The adapter's optimiser steps its weights to NaN, as an overflowing update would."""
    opt = tr.optimizers[adapter]
    real = opt.step

    def step(*args, **kwargs):
        out = real(*args, **kwargs)
        with torch.no_grad():
            for p in tr.base.parameters(adapter):
                p.fill_(float("nan"))
        return out

    opt.step = step  # type: ignore[method-assign]


def test_weights_that_go_non_finite_are_rolled_back_counted_and_stop_the_run(tmp_path: Path) -> None:
    from agon_env.algorithms.update import NonFiniteWeights

    tr = Trainer.build(resolve(tiny_config(tmp_path)))
    batch = with_rewards(rollout(tr.env, tr.agents, [0], 4, drafter="agent_a"), "drafter", [0, 1, 0, 1])
    sb, _ = tr.update.stream(batch, "drafter")
    before = [p.detach().clone() for p in tr.base.parameters("agent_a")]
    _poisoned(tr, "agent_a")
    with pytest.warns(RuntimeWarning, match=r"made its weights non-finite .*rolled back"):
        stats = tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=0)
    assert all(torch.equal(b, p) for b, p in zip(before, tr.base.parameters("agent_a"), strict=True))
    assert tr.counters["nan_skipped"] == 1 and tr.counters["updates"] == 0 and "loss/agent_a" not in stats
    with pytest.raises(NonFiniteWeights, match=r"non-finite on 2 updates in a row .*lower --optim.lr"):
        tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=1)
    assert all(torch.isfinite(p).all() for p in tr.base.parameters("agent_a"))


def test_a_nan_adapter_is_never_saved(tmp_path: Path) -> None:
    from agon_env.algorithms.update import NonFiniteWeights

    tr = Trainer.build(resolve(tiny_config(tmp_path)))
    with torch.no_grad():
        next(iter(tr.base.parameters("agent_b"))).fill_(float("nan"))
    with pytest.raises(NonFiniteWeights, match="agent_b's weights are not finite; not saved"):
        tr.save(tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
