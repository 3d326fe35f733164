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

**A prefix every row shares, read once.** Batched sampling prefills the prompt prefix its
rows share (the worked examples: ~330 of a challenger prompt's ~390 tokens) once. Copied into
every row's cache, that prefix is read again for every row at every decode step, so at batch
32 attention costs a sizeable share of what reading the weights does. Given ``shared_prefix=``
a :class:`~agon_env.agents.kv_cache.BufferCache` whose layers keep their prefix once
(``share_prefix``), :func:`prefix_attention` instead multiplies all rows' queries by the one
prefix at once (as Hydragen, arXiv 2402.05099, does on GPUs), with one softmax over prefix
and own scores together, so the result is the same attention up to float round-off. What it
buys end to end is measured in docs/benchmarks.md ("Cost levers, third round").

**Several batches in one forward.** Given ``packed=`` a
:class:`~agon_env.agents.packed_forward.PackedPlan`, the query is every batch's tokens packed into
one sequence, and the plan answers: each batch's queries attend in its own cache under its own
mask, through this same function (:mod:`agon_env.agents.packed_forward`).
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

    packed = kwargs.pop("packed", None)
    if packed is not None:  # several batches in one forward: each attends in its own cache
        attend = packed.attend(module, query, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs)
        return attend, None
    shared = kwargs.get("shared_prefix")
    prefix = None if shared is None else shared.shared_prefix(module.layer_idx)
    if prefix is not None:
        return prefix_attention(query, key, value, *prefix, attention_mask, scaling), None
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


def prefix_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    prefix_key: torch.Tensor,
    prefix_value: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float | None = None,
) -> torch.Tensor:
    """Attention of ``query`` ``[n, Hq, q, d]`` over a prefix all rows share (``prefix_key``,
    ``prefix_value``: ``[1, Hkv, P, d]``) followed by each row's own ``key``/``value``
    ``[n, Hkv, S, d]``; ``mask`` covers both (``[n or 1, 1, q, P + S]``, bool or additive; None:
    causal over the own tokens). Returns ``[n, q, Hq, d]``, what an attention interface returns.

    Each KV head's queries (its ``g`` query heads, every row) are one matrix, so the prefix
    costs one matrix product per head instead of ``n`` matrix-vector ones."""
    n, hq, q, d = query.shape
    hkv, p, s = key.shape[1], prefix_key.shape[2], key.shape[2]
    g = hq // hkv
    scale = d**-0.5 if scaling is None else scaling
    qg = query.reshape(n, hkv, g * q, d)  # query head h reads KV head h // g
    flat = qg.transpose(0, 1).reshape(hkv, n * g * q, d)
    scores_p = torch.matmul(flat, prefix_key[0].transpose(-1, -2)).view(hkv, n, g * q, p).transpose(0, 1)
    scores = torch.cat([scores_p, torch.matmul(qg, key.transpose(-1, -2))], dim=-1).float() * scale
    if mask is None:  # no padding: every prefix token, and the own tokens causally
        own = torch.ones(q, s, dtype=torch.bool, device=query.device).tril(s - q)
        mask = torch.cat([own.new_ones(q, p), own], dim=-1)[None, None]
    m = mask.reshape(mask.shape[0], 1, 1, q, p + s).expand(n, 1, g, q, p + s).reshape(n, 1, g * q, p + s)
    scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m
    probs = scores.softmax(dim=-1).to(value.dtype)
    pp = probs[..., :p].transpose(0, 1).reshape(hkv, n * g * q, p)
    out = torch.matmul(pp, prefix_value[0]).view(hkv, n, g * q, d).transpose(0, 1)
    out = out + torch.matmul(probs[..., p:], value)
    return out.reshape(n, hq, q, d).transpose(1, 2).contiguous()


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
