"""The GRPO core: group-relative advantages and the clipped surrogate loss.

Shapes: ``rewards`` is ``[G, N]`` (G groups of N rollouts of the same prompt);
token tensors are ``[S, T]`` (S sequences, right-padded to T, with a 0/1 ``mask``).

    A_i   = (r_i - mean(r)) / (std(r) + eps)        "std"  (GRPO)
    A_i   =  r_i - mean(r)                          "mean" (Dr. GRPO)
    keep  =  std(r) > 0                             the paper's σ > 0 rule
    ρ_t   =  exp(logπ_θ - logπ_old)                     π_old: the trainer before the update
    ℓ_t   = -w_t min(ρ_t A, clip(ρ_t, 1-ε, 1+ε_high) A) + β KL_t
    KL_t  =  exp(logπ_ref - logπ_θ) - (logπ_ref - logπ_θ) - 1      (k3, ≥ 0)

with ``w_t`` the detached sampler-to-trainer importance weight
(:mod:`agon_env.algorithms.rollout_correction`; 1 when sampler and trainer agree), and
the per-token loss is reduced by one of :data:`AGGREGATIONS`. Choices are looked up
in registries (dicts of functions), so adding a variant is one function and one entry.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

ADV_EPS = 1e-4
"""Added to the group std so near-constant groups don't explode (TRL uses the same value)."""


def _std_advantages(rewards: Tensor) -> Tensor:
    # Sample (Bessel-corrected) std, as in TRL's GRPOTrainer, so numbers compare directly.
    return (rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + ADV_EPS)


def _mean_advantages(rewards: Tensor) -> Tensor:
    # Dr. GRPO: dividing by std up-weights easy/hard prompts; keep only the centring.
    return rewards - rewards.mean(1, keepdim=True)


ADVANTAGES: dict[str, Callable[[Tensor], Tensor]] = {"std": _std_advantages, "mean": _mean_advantages}
"""Advantage estimators by name: ``[G, N]`` rewards -> ``[G, N]`` advantages."""


def group_advantages(rewards: Tensor, kind: str = "std") -> tuple[Tensor, Tensor]:
    """Advantages per rollout and a ``[G]`` bool mask of groups with reward variance.

    Dropped groups (all rewards equal, or a single rollout) get advantage 0: they carry
    no learning signal, and the trainer leaves them out of the loss and its normaliser.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [groups, rollouts]; got shape {tuple(rewards.shape)}")
    rewards = rewards.to(torch.float64)
    if rewards.shape[1] < 2:
        keep = torch.zeros(rewards.shape[0], dtype=torch.bool)
    else:
        keep = (rewards.max(1).values - rewards.min(1).values) > 0
    adv = ADVANTAGES[kind](rewards) if rewards.shape[1] > 1 else torch.zeros_like(rewards)
    adv = torch.where(keep[:, None], adv, torch.zeros_like(adv))
    return adv.to(torch.float32), keep


def _seq_mean(mask: Tensor, norm_len: int | None, n_seqs: float, n_tokens: float) -> Tensor:
    # Original GRPO: each sequence weighs the same, whatever its length.
    return mask / (mask.sum(1, keepdim=True).clamp(min=1) * n_seqs)


def _token_mean(mask: Tensor, norm_len: int | None, n_seqs: float, n_tokens: float) -> Tensor:
    # DAPO: each token weighs the same, so long traces are not down-weighted.
    return mask / max(n_tokens, 1.0)


def _dr_grpo(mask: Tensor, norm_len: int | None, n_seqs: float, n_tokens: float) -> Tensor:
    # Dr. GRPO: a constant normaliser (S × max_new_tokens) removes the length bias entirely.
    if not norm_len:
        raise ValueError("aggregation 'dr-grpo' needs norm_len (use max_new_tokens)")
    return mask / (n_seqs * norm_len)


AGGREGATIONS: dict[str, Callable[[Tensor, int | None, float, float], Tensor]] = {
    "seq-mean": _seq_mean,
    "token-mean": _token_mean,
    "dr-grpo": _dr_grpo,
}
"""Token-loss reductions by name, as weights: ``(mask [S,T], norm_len, S_total, T_total) -> w``.

Every reduction is ``Σ w·ℓ``, so weights computed once over the whole stream batch make
the loss of any split into micro-batches sum to exactly the full-batch loss.
"""


def token_weights(
    mask: Tensor,
    aggregation: str = "seq-mean",
    norm_len: int | None = None,
    *,
    n_seqs: float | None = None,
    n_tokens: float | None = None,
) -> Tensor:
    """The ``[S, T]`` weights of ``aggregation`` over a 0/1 token mask.

    ``n_seqs`` / ``n_tokens`` are the normalisers (default: this mask's own counts).
    Data-parallel ranks pass the totals over all ranks, so their losses add up to the
    loss one process would compute on the whole batch.
    """
    mask = mask.to(torch.float32)
    s = float(mask.shape[0]) if n_seqs is None else float(n_seqs)
    t = float(mask.sum()) if n_tokens is None else float(n_tokens)
    return AGGREGATIONS[aggregation](mask, norm_len, s, t)


def k3_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(π_θ ‖ π_ref) on tokens sampled from π_θ; always ≥ 0."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    weights: Tensor,
    *,
    eps: float = 0.2,
    eps_high: float | None = None,
    beta: float = 0.0,
    ref_logp: Tensor | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The clipped GRPO surrogate ``Σ w·ℓ`` for one (micro-)batch of sequences.

    ``logp`` (with grad), ``old_logp`` and ``ref_logp`` are ``[S, T]`` per-token log-probs,
    ``advantages`` is ``[S]`` and ``weights`` comes from :func:`token_weights` (0 on padding).
    ``is_weights`` (``[S, T]``, detached) multiplies the policy-gradient term only, as in TRL.
    Returns the scalar loss and detached token-averaged statistics.
    """
    weights = weights.to(logp.dtype)
    adv = advantages.to(logp.dtype)[:, None]
    ratio = torch.exp(logp - old_logp.detach())
    hi = 1 + (eps if eps_high is None else eps_high)
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, hi) * adv)
    if is_weights is not None:
        per_token = per_token * is_weights.detach().to(logp.dtype)
    kl = torch.zeros_like(logp)
    if beta:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp (log-probs under the adapter-disabled base)")
        kl = k3_kl(logp, ref_logp.detach())
        per_token = per_token + beta * kl
    loss = (per_token * weights).sum()
    with torch.no_grad():
        mask = (weights != 0).to(logp.dtype)
        n = mask.sum().clamp(min=1)
        was_clipped = ((ratio < 1 - eps) & (adv < 0)) | ((ratio > hi) & (adv > 0))
        stats = {
            "clip_frac": float((was_clipped.to(mask.dtype) * mask).sum() / n),
            "ratio_mean": float((ratio * mask).sum() / n),
            "kl": float((kl * mask).sum() / n),
            "tokens": float(mask.sum()),
        }
    return loss, stats
