"""Every GRPO formula against numbers computed by hand (see the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from agon_env.algorithms.grpo import ADV_EPS, group_advantages, grpo_loss, k3_kl, token_weights


def test_std_advantages_hand_computed():
    # mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735 -> ±0.5 / (0.57735 + 1e-4)
    adv, keep = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), "std")
    a = 0.5 / (math.sqrt(1 / 3) + ADV_EPS)
    assert keep.tolist() == [True]
    assert adv[0].tolist() == pytest.approx([a, -a, -a, a], rel=1e-6)


def test_std_advantages_conversion_pair():
    # rewards 3.5 and 0.5: mean 2.0, sample std sqrt((1.5² + 1.5²) / 1) = 2.12132
    adv, _ = group_advantages(torch.tensor([[3.5, 0.5]]), "std")
    a = 1.5 / (math.sqrt(4.5) + ADV_EPS)
    assert adv[0].tolist() == pytest.approx([a, -a], rel=1e-6)


def test_mean_only_advantages():
    adv, keep = group_advantages(torch.tensor([[3.0, 1.0, 2.0]]), "mean")
    assert adv[0].tolist() == pytest.approx([1.0, -1.0, 0.0])
    assert keep.tolist() == [True]


def test_zero_variance_groups_dropped():
    rewards = torch.tensor([[2.5, 2.5, 2.5], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]])
    adv, keep = group_advantages(rewards, "std")
    assert keep.tolist() == [False, True, False]
    assert adv[0].abs().sum() == 0 and adv[2].abs().sum() == 0
    # group 2: mean 1/6, deviations (-1/6, 1/3, -1/6), sample std sqrt((1 + 4 + 1) / 36 / 2) = sqrt(1/12)
    s = math.sqrt(1 / 12) + ADV_EPS
    assert adv[1].tolist() == pytest.approx([-1 / 6 / s, (1 / 3) / s, -1 / 6 / s], rel=1e-5)


def test_single_rollout_group_has_no_signal():
    adv, keep = group_advantages(torch.tensor([[1.0], [0.0]]))
    assert keep.tolist() == [False, False] and adv.abs().sum() == 0


def test_bad_reward_shape_is_explained():
    with pytest.raises(ValueError, match=r"\[groups, rollouts\]"):
        group_advantages(torch.tensor([1.0, 2.0]))


def _loss(logp, old, adv, mask=None, aggregation="seq-mean", norm_len=None, **kw):
    logp = torch.tensor(logp, requires_grad=True)
    mask = torch.ones_like(logp) if mask is None else torch.tensor(mask)
    w = token_weights(mask, aggregation, norm_len)
    return grpo_loss(logp, torch.tensor(old), torch.tensor(adv), w, **kw), logp


def test_clip_positive_advantage():
    # ratios 1.5 and 0.5, A = +1, ε = 0.2: min(1.5, 1.2) = 1.2 and min(0.5, 0.8) = 0.5
    (loss, stats), logp = _loss([[math.log(1.5), math.log(0.5)]], [[0.0, 0.0]], [1.0])
    assert loss.item() == pytest.approx(-(1.2 + 0.5) / 2)
    assert stats["clip_frac"] == pytest.approx(0.5)
    loss.backward()
    # the clipped token gets no gradient; the other gets -A·ρ / T = -0.5 / 2
    assert logp.grad[0].tolist() == pytest.approx([0.0, -0.25])


def test_clip_negative_advantage():
    # A = -1: min(-1.5, -1.2) = -1.5 and min(-0.5, -0.8) = -0.8 -> loss (1.5 + 0.8) / 2
    (loss, stats), _ = _loss([[math.log(1.5), math.log(0.5)]], [[0.0, 0.0]], [-1.0])
    assert loss.item() == pytest.approx(1.15)
    assert stats["clip_frac"] == pytest.approx(0.5)


def test_clip_higher():
    # ε_high = 0.28: ratio 1.25 passes, ratio 1.3 is clipped to 1.28
    (loss, _), _ = _loss([[math.log(1.25), math.log(1.3)]], [[0.0, 0.0]], [1.0], eps_high=0.28)
    assert loss.item() == pytest.approx(-(1.25 + 1.28) / 2)


def test_aggregations_hand_computed():
    loss = torch.tensor([[1.0, 2.0, 7.0], [3.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])

    def agg(name, norm_len=None):
        return float((loss * token_weights(mask, name, norm_len)).sum())

    assert agg("seq-mean") == pytest.approx((1.5 + 3.0) / 2)
    assert agg("token-mean") == pytest.approx(6 / 3)
    assert agg("dr-grpo", 4) == pytest.approx(6 / (2 * 4))
    with pytest.raises(ValueError, match="norm_len"):
        token_weights(mask, "dr-grpo")


def test_micro_batches_sum_to_full_batch_loss():
    torch.manual_seed(0)
    logp, old = torch.randn(4, 5) * 0.1 - 1, torch.randn(4, 5) * 0.1 - 1
    adv = torch.tensor([1.0, -0.5, 2.0, -1.0])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]).float()
    for name in ("seq-mean", "token-mean", "dr-grpo"):
        w = token_weights(mask, name, 5)
        full, _ = grpo_loss(logp, old, adv, w)
        parts = sum(
            grpo_loss(logp[i : i + 2], old[i : i + 2], adv[i : i + 2], w[i : i + 2])[0] for i in (0, 2)
        )
        assert float(parts) == pytest.approx(float(full), rel=1e-5)


def test_aggregation_through_loss():
    # ratio 1 everywhere, A = (+1, -2): per-token losses -1,-1 | +2; mask drops a pad token
    logp, old = [[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]
    mask = [[1.0, 1.0], [1.0, 0.0]]
    (tok, _), _ = _loss(logp, old, [1.0, -2.0], mask, aggregation="token-mean")
    (seq, _), _ = _loss(logp, old, [1.0, -2.0], mask, aggregation="seq-mean")
    (dr, _), _ = _loss(logp, old, [1.0, -2.0], mask, aggregation="dr-grpo", norm_len=5)
    assert tok.item() == pytest.approx(0.0)
    assert seq.item() == pytest.approx(0.5)
    assert dr.item() == pytest.approx(0.0)


def test_k3_kl_hand_computed():
    # logπ = 0, logπ_ref = ln 2: e^{ln2} - ln2 - 1 = 0.306853
    assert float(k3_kl(torch.tensor(0.0), torch.tensor(math.log(2)))) == pytest.approx(1 - math.log(2))
    assert float(k3_kl(torch.tensor(-1.3), torch.tensor(-1.3))) == 0.0


def test_kl_penalty_in_loss():
    (loss, stats), _ = _loss([[0.0]], [[0.0]], [0.0], beta=0.1, ref_logp=torch.tensor([[math.log(2)]]))
    assert loss.item() == pytest.approx(0.1 * (1 - math.log(2)))
    assert stats["kl"] == pytest.approx(1 - math.log(2))
    with pytest.raises(ValueError, match="ref_logp"):
        _loss([[0.0]], [[0.0]], [0.0], beta=0.1)


def test_first_inner_iteration_is_policy_gradient():
    # with π_θ = π_old the surrogate's gradient is -A/T per token (seq-mean, T tokens)
    (loss, _), logp = _loss([[-0.7, -1.1, -0.2]], [[-0.7, -1.1, -0.2]], [2.0])
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-2 / 3] * 3)
