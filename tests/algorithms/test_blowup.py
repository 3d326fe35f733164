"""Blow-ups: an absurd learning rate refused by its bound, a finite step that replaces the adapter
rolled back, a collapse of usable completions rolled back and replayed, two in a row stop."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from algo_helpers import TINY_CLI, tiny_config, with_rewards

from agon_env.algorithms.blowup import (
    COLLAPSE_P,
    BlowUp,
    BlowupWatch,
    collapse_p,
    update_ratio,
)
from agon_env.algorithms.checkpoint import read_checkpoint
from agon_env.algorithms.commands.train import main
from agon_env.algorithms.rollout import rollout
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import resolve

pytestmark = pytest.mark.usefixtures("parity_on_path")


@pytest.mark.parametrize("lr", ["1e30", "1.5"])
def test_a_learning_rate_above_its_bound_is_refused_before_anything_loads(tmp_path: Path, capsys, lr) -> None:
    assert main([*TINY_CLI, "--model", "no/such-model", "--lr", lr, "--out-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"optim.lr = {float(lr)!r}: the learning rate must be > 0 and at most 1" in err
    assert "Traceback" not in err and not (tmp_path / "r").exists()


def test_the_update_ratio_is_the_relative_step() -> None:
    before = [torch.tensor([3.0, 0.0]), torch.tensor([4.0])]
    after = [torch.tensor([3.0, 1.0]), torch.tensor([4.0])]
    assert update_ratio(after, before) == pytest.approx(1 / 5)
    assert update_ratio(before, before) == 0.0
    assert update_ratio([torch.ones(2)], [torch.zeros(2)]) == float("inf")


def test_a_collapse_needs_both_a_significant_rise_and_most_completions_unusable() -> None:
    assert collapse_p((0, 8), (8, 8)) == pytest.approx(1 / 12870)  # 1 / C(16, 8)
    assert collapse_p((0, 8), (7, 8)) is None  # p = 0.0007: within the bound's chance
    assert collapse_p((8, 8), (8, 8)) is None  # unusable before as after (an untrained model)
    assert collapse_p((0, 100), (40, 100)) is None  # a significant rise, but most still usable
    assert collapse_p((0, 100), (60, 100)) < COLLAPSE_P


def _scaled(tr: Trainer, adapter: str, factor: float) -> None:
    """The adapter's optimiser steps its weights to ``factor`` times themselves: finite, and far."""
    opt = tr.optimizers[adapter]
    real = opt.step

    def step(*args, **kwargs):
        out = real(*args, **kwargs)
        with torch.no_grad():
            for p in tr.base.parameters(adapter):
                p.mul_(factor)
        return out

    opt.step = step  # type: ignore[method-assign]


def test_a_step_that_moves_the_adapter_by_more_than_itself_is_rolled_back_and_the_second_stops(
    tmp_path: Path,
) -> None:
    tr = Trainer.build(resolve(tiny_config(tmp_path)))
    batch = with_rewards(rollout(tr.env, tr.agents, [0], 4, drafter="agent_a"), "drafter", [0, 1, 0, 1])
    sb, _ = tr.update.stream(batch, "drafter")
    before = [p.detach().clone() for p in tr.base.parameters("agent_a")]
    _scaled(tr, "agent_a", 1e6)
    with pytest.warns(RuntimeWarning, match=r"‖Δθ‖/‖θ‖ = .* > 1 .*rolled back"):
        stats = tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=0)
    assert all(torch.equal(b, p) for b, p in zip(before, tr.base.parameters("agent_a"), strict=True))
    assert tr.counters["blowups"] == 1 and tr.counters["updates"] == 0 and "loss/agent_a" not in stats
    said = r"step 1: agent_a's update blew up on 2 updates in a row .*lower --optim.lr"
    with pytest.raises(BlowUp, match=said), pytest.warns(RuntimeWarning):
        tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=1)
    assert all(torch.equal(b, p) for b, p in zip(before, tr.base.parameters("agent_a"), strict=True))


def test_an_ordinary_step_passes_the_watch(tmp_path: Path) -> None:
    tr = Trainer.build(resolve(tiny_config(tmp_path)))
    tr.train_step()
    tr.train_step()
    assert tr.counters["blowups"] == 0 and tr.counters["updates"] > 0


def test_a_collapse_rolls_the_update_back_replays_the_rollout_and_the_second_stops(
    tmp_path: Path, monkeypatch
) -> None:
    tr = Trainer.build(resolve(tiny_config(tmp_path)))

    # What the rollouts show, per (adapter, role) as (unusable, completions): usable before the first
    # update, agent_a's drafts unusable after it, usable again once it is rolled back, unusable
    # after the next one.
    def shown_as(a_bad: int) -> dict[tuple[str, str], tuple[int, int]]:
        fine = {(n, r): (0, 8) for n in ("agent_a", "agent_b") for r in ("drafter", "challenger")}
        return {**fine, ("agent_a", "drafter"): (a_bad, 8)}

    shown = iter([shown_as(0), shown_as(8), shown_as(0), shown_as(8)])
    monkeypatch.setattr(tr, "_unusable", lambda batch: next(shown))
    start = {n: [p.detach().clone() for p in tr.base.parameters(n)] for n in ("agent_a", "agent_b")}
    tr.train_step()
    assert not tr.rolled_back
    moved = [p.detach().clone() for p in tr.base.parameters("agent_a")]
    assert not all(torch.equal(a, b) for a, b in zip(start["agent_a"], moved, strict=True))
    told = []  # on_rollback sees the restored weights live (agon train rewrites a snapshot then)
    tr.on_rollback = lambda step, names: told.append(
        (step, names, [p.detach().clone() for p in tr.base.parameters("agent_a")])
    )
    replayed = []
    real = tr._rollout
    monkeypatch.setattr(tr, "_rollout", lambda seats: (replayed.append(seats), real(seats))[1])
    with pytest.warns(
        RuntimeWarning, match=r"agent_a: its unusable drafter completions rose from 0/8 to 8/8"
    ):
        tr.train_step()
    assert tr.rolled_back and len(replayed) == 2 and tr.counters["blowups"] == 1
    assert [(step, names) for step, names, _ in told] == [(1, ["agent_a"])]
    assert all(torch.equal(a, b) for a, b in zip(start["agent_a"], told[0][2], strict=True))
    # agent_a's second update started from the weights before its first, not from the blown-up ones.
    assert tr.update.watch.saved["agent_a"][0] and all(
        torch.equal(a, b) for a, b in zip(start["agent_a"], tr.update.watch.saved["agent_a"][0], strict=True)
    )
    said = r"agent_a's update blew up on 2 updates in a row \(its unusable drafter"
    with pytest.raises(BlowUp, match=said), pytest.warns(RuntimeWarning):
        tr.train_step()


def test_a_run_whose_updates_blow_up_stops_named_as_a_user_error_and_saves_no_adapters(
    tmp_path: Path,
) -> None:
    from agon_env.algorithms.run import train
    from agon_env.errors import UserError

    cfg = tiny_config(tmp_path, **{"optim.lr": 0.9, "optim.warmup_ratio": 0.0, "steps": 3, "save_every": 1})
    with (
        pytest.raises(BlowUp, match=r"blew up on 2 updates in a row \(‖Δθ‖/‖θ‖ = ") as e,
        pytest.warns(RuntimeWarning),
    ):
        train(resolve(cfg))
    assert isinstance(e.value, UserError)  # agon train: one line, exit 2
    assert not (cfg.run_dir / "adapters").exists()
    # Step 0's checkpoint holds the weights its two rolled-back updates started from: LoRA's init,
    # each |w| under 1/√fan_in, where the blown-up ones moved by about the rate, 0.9.
    saved = read_checkpoint(cfg.run_dir / "checkpoint.pt")
    assert saved["counters"]["blowups"] == 2 and saved["counters"]["updates"] == 0
    assert max(float(t.abs().max()) for a in saved["adapters"].values() for t in a.values()) < 0.5


def test_the_blowups_are_checkpointed(tmp_path: Path) -> None:
    tr = Trainer.build(resolve(tiny_config(tmp_path)))
    tr.counters["blowups"] = 1
    (tmp_path / "run").mkdir()
    tr.save(tmp_path / "run")
    assert read_checkpoint(tmp_path / "run" / "checkpoint.pt")["counters"]["blowups"] == 1


def test_a_watch_knows_no_streak_until_an_update_is_judged() -> None:
    watch = BlowupWatch({})
    assert watch.counters == {"blowups": 0} and watch.collapsed({("a", "drafter"): (8, 8)}) == {}


def test_each_role_is_held_to_its_own_past() -> None:
    """A challenger that misses the format more than the drafter is no collapse when roles swap."""
    watch = BlowupWatch({}, before={("a", "drafter"): (5, 64), ("a", "challenger"): (40, 64)})
    watch.saved["a"] = ([], {})
    watch.passed("a")
    assert watch.collapsed({("a", "challenger"): (42, 64)}) == {}  # pooled by adapter: 5/64 -> 42/64
    assert watch.streak["a"] == 0 and "a" not in watch.pending
    watch.passed("a")
    assert list(watch.collapsed({("a", "drafter"): (60, 64)})) == ["a"]
