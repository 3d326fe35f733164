"""Sampler-trainer mismatch: every correction against hand-computed weights, the mismatch
figures, and the on-policy guard -- in isolation and stopping a real update."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch
from algo_helpers import tiny_config, with_rewards

from agon_env.algorithms.distributed import DistContext
from agon_env.algorithms.rollout import rollout
from agon_env.algorithms.rollout_correction import (
    CORRECTIONS,
    OnPolicyError,
    correct,
    correction_weights,
    guard,
)
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import resolve

# Two sequences; the second has one real token. δ = trainer - sampler.
TRAINER = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, 0.0, 0.0]])
SAMPLER = torch.tensor([[-1.0 - math.log(3), -2.0, -0.5 + math.log(2)], [-0.1 + 0.2, 0.0, 0.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
# exp(δ) per token: 3, 1, 1/2 | e^-0.2 ; per sequence: 3/2 | e^-0.2
E = math.exp(-0.2)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("none", [[1, 1, 1], [1, 0, 0]]),
        ("token-truncate", [[2, 1, 0.5], [E, 0, 0]]),
        ("token-mask", [[0, 1, 0.5], [E, 0, 0]]),
        ("sequence-truncate", [[1.5, 1.5, 1.5], [E, 0, 0]]),
        ("sequence-mask", [[1.5, 1.5, 1.5], [E, 0, 0]]),
    ],
)
def test_weights_by_hand(kind, expected):
    w = correction_weights(TRAINER, SAMPLER, MASK, kind, cap=2.0)
    assert torch.allclose(w, torch.tensor(expected, dtype=torch.float32), atol=1e-6)
    assert not w.requires_grad


def test_sequence_modes_cut_a_whole_sequence_over_the_cap():
    trainer, sampler = torch.zeros(1, 2), torch.full((1, 2), -0.6)  # sequence ratio e^1.2 ≈ 3.3
    mask = torch.ones(1, 2)
    assert torch.allclose(
        correction_weights(trainer, sampler, mask, "sequence-truncate", 2.0), torch.full((1, 2), 2.0)
    )
    assert torch.equal(correction_weights(trainer, sampler, mask, "sequence-mask", 2.0), torch.zeros(1, 2))


def test_every_correction_is_the_identity_when_sampler_and_trainer_agree():
    for kind in CORRECTIONS:
        assert torch.allclose(correction_weights(TRAINER, TRAINER, MASK, kind, 2.0), MASK)


def test_mismatch_figures_by_hand_and_the_guard():
    seen: dict[str, float] = defaultdict(float)
    correct(TRAINER, SAMPLER, MASK, "token-truncate", 2.0, seen)
    figures = guard(seen, DistContext(), None, "agent_a", 3, step=7)
    deltas = [math.log(3), 0.0, -math.log(2), -0.2]
    assert figures["mean_abs_diff"] == pytest.approx(sum(map(abs, deltas)) / 4)
    assert figures["max_abs_diff"] == pytest.approx(math.log(3))
    assert figures["kl"] == pytest.approx(sum(math.exp(d) - d - 1 for d in deltas) / 4)
    assert figures["is_weight_mean"] == pytest.approx((2 + 1 + 0.5 + E) / 4)
    assert figures["over_cap_frac"] == pytest.approx(1 / 4)
    with pytest.raises(
        OnPolicyError, match=r"step 7: .*'agent_a' \(engine version v3\).*grpo.onpolicy_max_kl 0.05"
    ):
        guard(seen, DistContext(), 0.05, "agent_a", 3, step=7)


def test_nonfinite_log_probs_are_left_to_the_loss():
    seen: dict[str, float] = defaultdict(float)
    sampler = SAMPLER.clone()
    sampler[0, 1] = float("nan")
    correct(TRAINER, sampler, MASK, "token-truncate", 2.0, seen)
    assert seen["tokens"] == 3 and math.isfinite(seen["kl_sum"])


def _trainer(tmp_path, **updates):
    return Trainer.build(resolve(tiny_config(tmp_path, **updates)))


pytestmark = pytest.mark.usefixtures("parity_on_path")


def test_hf_sampler_and_trainer_agree_and_the_metrics_are_logged(tmp_path):
    metrics = _trainer(tmp_path, algo="agon").train_step()
    for adapter in ("agent_a", "agent_b"):
        kl = metrics.get(f"onpolicy/kl/{adapter}")
        if kl is None:
            continue  # every group of that stream dropped this step
        assert kl < 1e-6 and metrics[f"onpolicy/is_weight_mean/{adapter}"] == pytest.approx(1, abs=1e-4)
    assert any(k.startswith("onpolicy/kl/") for k in metrics)


def test_a_stale_sampler_stops_the_update_before_it_moves(tmp_path):
    """A sampler that served other weights (its log-probs shifted) is caught before opt.step."""
    tr = _trainer(tmp_path)
    batch = with_rewards(rollout(tr.env, tr.agents, [0, 1], 4, drafter="agent_a"), "drafter", [0, 1] * 4)
    sb, _ = tr.update.stream(batch, "drafter")
    for t in sb.turns:
        t.completion.logprobs = [x - 0.5 for x in t.completion.logprobs]  # KL ≈ e^.5 - 1.5 ≈ 0.15
    before = [p.detach().clone() for p in tr.base.parameters("agent_a")]
    with pytest.raises(OnPolicyError, match=r"'agent_a'.*stale or failed adapter load"):
        tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=tr.step)
    assert all(torch.equal(b, p) for b, p in zip(before, tr.base.parameters("agent_a"), strict=True))


def test_the_clipped_ratio_is_between_trainer_versions_over_inner_iterations(tmp_path):
    """μ = 2: iteration 0's ratio is exactly 1 (π_old is the trainer's own forward); the
    sampler's offset enters only through the capped weights."""
    tr = _trainer(tmp_path, **{"grpo.inner_iters": 2, "grpo.onpolicy_max_kl": None})
    batch = with_rewards(rollout(tr.env, tr.agents, [0, 1], 4, drafter="agent_a"), "drafter", [0, 1] * 4)
    sb, _ = tr.update.stream(batch, "drafter")
    for t in sb.turns:
        t.completion.logprobs = [x - 3.0 for x in t.completion.logprobs]  # every weight hits the cap
    stats = tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=tr.step)
    assert stats["onpolicy/is_weight_mean/agent_a"] == pytest.approx(2.0)
    assert stats["onpolicy/over_cap_frac/agent_a"] == pytest.approx(1.0)
    assert stats["onpolicy/mean_abs_diff/agent_a"] == pytest.approx(3.0, abs=1e-4)
    assert 0 < stats["ratio_mean/agent_a"] < 2  # mean of iteration 0 (exactly 1) and iteration 1
