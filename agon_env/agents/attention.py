"""SDPA attention that keeps grouped-query KV heads grouped on CPU, registered with transformers.

transformers' ``sdpa`` attention expands the KV cache to every query head (``repeat_kv``)
whenever an attention mask is passed, because CUDA's fused kernels take GQA only without a
mask. Batched sampling always passes a mask (left padding), so on CPU every decode step
copied the whole cache 3× for SmolLM2 (9 query heads over 3 KV heads): 12 % of a decode
step in a py-spy profile. torch's CPU SDPA takes a mask together with ``enable_gqa``, with
identical results (tested), so on CPU ``agon_sdpa`` calls it directly; anywhere else, and
for anything it does not cover (position biases, paged caches, a causal query shorter than
its keys), it hands the call to transformers' own ``sdpa`` unchanged.

:func:`use_gqa_attention` switches a loaded model to it (``load_base`` does, for every
model whose config uses ``sdpa``).
"""

from __future__ import annotations

from typing import Any

import torch

NAME = "agon_sdpa"


def gqa_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    q_len, kv_len = query.shape[2], key.shape[2]
    causal = (
        q_len > 1
        and attention_mask is None
        and (is_causal if is_causal is not None else getattr(module, "is_causal", True))
    )
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    covered = (
        query.device.type == "cpu"
        and grouped
        and kwargs.get("position_bias") is None
        and kwargs.get("cache") is None
        and not (causal and kv_len > q_len)
    )
    if not covered:
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=causal,
        enable_gqa=True,
    )
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make ``agon_sdpa`` a transformers attention implementation (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, gqa_sdpa_attention)
    if NAME not in ALL_MASK_ATTENTION_FUNCTIONS:
        AttentionMaskInterface.register(NAME, sdpa_mask)  # the same masks as sdpa


def use_gqa_attention(model: Any) -> bool:
    """Switch ``model`` from ``sdpa`` to ``agon_sdpa``; False (unchanged) for any other attention."""
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    register()
    model.set_attn_implementation(NAME)
    return True
