"""Sampler–trainer mismatch: the importance-sampling correction and the on-policy guard.

Rollouts come from a *sampler* (the HF backend, or a vLLM engine with its own kernels,
dtype and copy of each adapter); the update differentiates the *trainer*'s forward. With
``δ_t = log π_trainer(y_t) − log π_sampler(y_t)`` on the sampled tokens:

* **correction** -- the policy-gradient term of every token is multiplied by a detached
  weight ``w_t`` from :data:`CORRECTIONS` (truncated importance sampling, as TRL's
  ``vllm_importance_sampling_mode`` and verl's rollout correction do; cap 2 is verl's
  default threshold). The clipped ratio of the loss is then between trainer versions only
  (``π_θ / π_θ_old``, π_θ_old the trainer's own forward before the update), as in TRL;
* **guard** -- :func:`mismatch` measures mean ``|δ|``, max ``|δ|`` and a k3 estimate of
  KL(π_sampler ‖ π_trainer) per adapter every step; :func:`check_onpolicy` stops the run
  when the KL passes a threshold. The step's rollouts were sampled right after the sync
  that published the adapter's previous update, so a large mismatch is the signature of a
  stale or failed adapter load in the engine -- the trainer would otherwise go on
  training on another policy's samples. It cannot see a stale version that differs from
  the new one by less than the sampler's numerical noise (one small update, bf16).

With the HF backend, sampler and trainer are the same weights in the same dtype, so
``w_t ≈ 1`` and the measured KL is round-off (~1e-7 in fp32).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agon_env.algorithms import distributed as dist
from agon_env.algorithms.errors import OnPolicyError


def _none(delta: Tensor, mask: Tensor, cap: float) -> Tensor:
    return torch.ones_like(delta)


def _token_truncate(delta: Tensor, mask: Tensor, cap: float) -> Tensor:
    # TIS: keep every token, bound the weight so one mis-sampled token cannot dominate.
    return torch.exp(delta).clamp(max=cap)


def _token_mask(delta: Tensor, mask: Tensor, cap: float) -> Tensor:
    # MIS: tokens the trainer finds far likelier than the sampler did are dropped, not bounded.
    w = torch.exp(delta)
    return torch.where(w <= cap, w, torch.zeros_like(w))


def _sequence_ratio(delta: Tensor, mask: Tensor) -> Tensor:
    return torch.exp((delta * mask).sum(1, keepdim=True)).expand_as(delta)


def _sequence_truncate(delta: Tensor, mask: Tensor, cap: float) -> Tensor:
    return _sequence_ratio(delta, mask).clamp(max=cap)


def _sequence_mask(delta: Tensor, mask: Tensor, cap: float) -> Tensor:
    w = _sequence_ratio(delta, mask)
    return torch.where(w <= cap, w, torch.zeros_like(w))


CORRECTIONS: dict[str, Callable[[Tensor, Tensor, float], Tensor]] = {
    "none": _none,
    "token-truncate": _token_truncate,
    "token-mask": _token_mask,
    "sequence-truncate": _sequence_truncate,
    "sequence-mask": _sequence_mask,
}
"""Rollout corrections by name: ``(δ [S,T], mask [S,T], cap) -> w [S,T]`` (0 on padding)."""


def correction_weights(trainer: Tensor, sampler: Tensor, mask: Tensor, kind: str, cap: float) -> Tensor:
    """The detached ``[S, T]`` importance weights ``w_t`` of correction ``kind``."""
    with torch.no_grad():
        mask = mask.to(trainer.dtype)
        delta = (trainer - sampler) * mask
        return CORRECTIONS[kind](delta, mask, cap) * mask


def correct(
    trainer: Tensor, sampler: Tensor, mask: Tensor, kind: str, cap: float, seen: dict[str, float]
) -> Tensor:
    """:func:`correction_weights` of one micro-batch, adding its :func:`mismatch` into ``seen``."""
    weights = correction_weights(trainer, sampler, mask, kind, cap)
    for f, v in mismatch(trainer, sampler, mask, weights, cap).items():
        seen[f] = max(seen[f], v) if f == "abs_max" else seen[f] + v
    return weights


MISMATCH_FIELDS = ("abs_sum", "kl_sum", "tokens", "abs_max", "w_sum", "over_cap")
"""What :func:`mismatch` returns: sums add up over micro-batches and ranks; ``abs_max`` takes the max."""


def mismatch(trainer: Tensor, sampler: Tensor, mask: Tensor, weights: Tensor, cap: float) -> dict[str, float]:
    """Sums over one micro-batch's tokens: ``|δ|``, k3 KL(π_sampler ‖ π_trainer), the weights,
    and how many tokens have a per-token ratio over ``cap``."""
    with torch.no_grad():
        delta = trainer.double() - sampler.double()
        # A non-finite log-prob is the loss's business (that update is skipped), not a mismatch.
        m = mask.to(torch.float64) * torch.isfinite(delta)
        delta = torch.where(m > 0, delta, torch.zeros_like(delta))
        kl = (torch.exp(delta) - delta - 1) * m  # k3 on samples from the sampler; >= 0
        w = weights.double() * m
        return {
            "abs_sum": float(delta.abs().sum()),
            "kl_sum": float(kl.sum()),
            "tokens": float(m.sum()),
            "abs_max": float(delta.abs().max()) if delta.numel() else 0.0,
            "w_sum": float(w.sum()),
            "over_cap": float(((torch.exp(delta) > cap) & (m > 0)).sum()),
        }


def summarize_mismatch(total: dict[str, float]) -> dict[str, float]:
    """Token means of the summed :func:`mismatch` fields (``tokens`` stays a count)."""
    n = max(total.get("tokens", 0.0), 1.0)
    return {
        "mean_abs_diff": total["abs_sum"] / n,
        "max_abs_diff": total["abs_max"],
        "kl": total["kl_sum"] / n,
        "is_weight_mean": total["w_sum"] / n,
        "over_cap_frac": total["over_cap"] / n,
    }


def check_onpolicy(
    figures: dict[str, float], max_kl: float | None, adapter: str, version: int | None, step: int
) -> None:
    """Raise :class:`OnPolicyError` when the measured KL passes ``max_kl`` (``None``: never)."""
    if max_kl is None or figures["kl"] <= max_kl:
        return
    served = f"engine version v{version}" if version is not None else "the sampler's copy"
    raise OnPolicyError(
        f"step {step}: on-policy guard: adapter {adapter!r} ({served}) samples from another policy than "
        f"the trainer holds: KL(sampler || trainer) {figures['kl']:.3g} > grpo.onpolicy_max_kl {max_kl:g} "
        f"(mean |Δ log p| {figures['mean_abs_diff']:.3g}, max {figures['max_abs_diff']:.3g}); "
        "the engine is likely serving a stale or failed adapter load. Stopped before this update; "
        "the run folder holds the last good checkpoint (--resume)"
    )


def guard(
    seen: dict[str, float],
    ctx: dist.DistContext,
    max_kl: float | None,
    adapter: str,
    version: int | None,
    step: int,
) -> dict[str, float]:
    """The adapter's mismatch figures over all ranks from :func:`mismatch` sums; every rank
    raises alike past ``max_kl`` (:func:`check_onpolicy`)."""
    summed = [f for f in MISMATCH_FIELDS if f != "abs_max"]
    total = dict(zip(summed, dist.all_sum([seen[f] for f in summed], ctx), strict=True))
    total["abs_max"] = dist.all_max([seen["abs_max"]], ctx)[0]
    figures = summarize_mismatch(total)
    check_onpolicy(figures, max_kl, adapter, version, step)
    return figures
