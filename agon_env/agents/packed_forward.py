"""Several batches' forwards as one: their tokens packed into one sequence, each attending in its own cache.

When a request arrives while others decode, the generation engine (:mod:`agon_env.agents.engine`)
used to prefill it in a forward of its own before the decode step: on CPU each forward reads every
weight once whatever its tokens, and a lone arrival's prefill cost about as much again as the
decode step (serve_bench with requests spread over 5 s ran 27 prefills where the burst ran 2;
docs/serving.md). :func:`forward` runs the running batch's decode tokens and the arrivals' prompt
tails in **one** forward, as vLLM's chunked prefill does: every token is a row of the same
matmuls (``[1, N]`` input, each token its own position), while each batch's queries attend only
in that batch's own :class:`~agon_env.agents.kv_cache.BufferCache` under the 4-D mask transformers
builds for that batch's forward alone (:class:`PackedPlan`). Each batch's keys and values go into
its own cache, as its own forward would have written them.

**Arithmetic.** The attention of each batch is its own forward's; the matmuls run over more rows,
so their round-off can differ from the separate forwards' (MKL's sums depend on the row count):
the same tokens up to float round-off, as any join of rows into a running batch already gives.

**What it buys**: in ``benchmarks/serve_bench.py --threaded --ride-ab --spread-s 5`` the engine's
run took 0.933 and 0.949 of the same run with every arrival a forward of its own (docs/serving.md).

**Where it applies** (:func:`packable`): models whose attention runs ``agon_sdpa`` (the attention
function receives the plan and answers for it), with no sliding-window layers (one mask serves
every layer, as in the model's own forward) and a forward that takes ``logits_to_keep`` (given the
index of each row's last token). Anything else prefills in a forward of its own, as before.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import Cache

from agon_env.agents.attention import NAME as AGON_SDPA
from agon_env.agents.kv_cache import BufferCache


@dataclass(eq=False)
class Part:
    """One batch's share of a packed forward: what its own forward would have been called with."""

    ids: torch.Tensor
    """``[rows, width]`` token ids (a decode step: ``[rows, 1]``)."""
    mask: torch.Tensor
    """``[rows, cached + width]`` the 2-D attention mask its own forward would get."""
    positions: torch.Tensor
    """``[rows, width]`` each token's position."""
    cache: BufferCache


def text_config(model: Any) -> Any:
    """The config of ``model``'s decoder (its text model's, for a multimodal one)."""
    cfg = model.config
    return cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg


def packable(model: Any) -> bool:
    """Whether ``model`` (a causal LM) can run :func:`forward` (the module docstring's "Where")."""
    cfg = text_config(model)
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"]
    if getattr(cfg, "_attn_implementation", None) != AGON_SDPA or set(layer_types) != {"full_attention"}:
        return False
    return "logits_to_keep" in inspect.signature(model.forward).parameters


class PackedPlan:
    """Where each part's tokens sit in the packed sequence, and each part's mask: built before the
    forward, from the caches as they are then (what the model's own mask would have read)."""

    def __init__(self, model: Any, parts: list[Part]) -> None:
        from transformers.masking_utils import create_causal_mask

        cfg = text_config(model)
        dtype = next(model.parameters()).dtype
        self.parts = parts
        self.offsets: list[int] = []
        self.masks: list[Any] = []
        at = 0
        for p in parts:
            n, w = p.ids.shape
            self.offsets.append(at)
            at += n * w
            shaped = torch.empty((n, w, 1), dtype=dtype, device=p.ids.device)  # read for its shape only
            self.masks.append(create_causal_mask(cfg, shaped, p.mask, p.cache, position_ids=p.positions))
        self.tokens = at
        self._kv: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def _slices(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``x`` ``[1, H, N, d]`` cut into each part's ``[rows, H, width, d]``."""
        out = []
        for p, at in zip(self.parts, self.offsets, strict=True):
            n, w = p.ids.shape
            y = x[0, :, at : at + n * w].reshape(x.shape[1], n, w, x.shape[-1])
            out.append(y.transpose(0, 1).contiguous())
        return out

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int) -> None:
        """Write each part's keys and values into its own cache (the layer's attention reads them)."""
        self._kv[layer] = [
            p.cache.update(k, v, layer)
            for p, k, v in zip(self.parts, self._slices(keys), self._slices(values), strict=True)
        ]

    def attend(self, module: Any, query: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Each part's attention as its own forward computes it, packed back: ``[1, N, Hq, d]``."""
        from agon_env.agents.attention import gqa_sdpa_attention

        outs = []
        kv = self._kv.pop(module.layer_idx)
        for p, q, (k, v), mask in zip(self.parts, self._slices(query), kv, self.masks, strict=True):
            shared = p.cache if p.cache.shared_prefix(0) is not None else None
            out, _ = gqa_sdpa_attention(module, q, k, v, mask, shared_prefix=shared, **kwargs)
            outs.append(out.reshape(1, -1, *out.shape[2:]))
        return torch.cat(outs, dim=1)


class PackedCache(Cache):
    """What the model is given as its cache: each layer's update goes to the parts' own caches."""

    def __init__(self, plan: PackedPlan) -> None:
        super().__init__(layers=[])
        self.plan = plan

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.plan.update(key_states, value_states, layer_idx)
        return key_states, value_states  # unread: the attention takes each part's from the plan

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0


def forward(model: Any, parts: list[Part]) -> list[torch.Tensor]:
    """One forward over every part's tokens; per part, ``[rows, vocab]``: the logits of each row's
    last token. The model runs whatever adapters it was set to (per token, where they differ:
    :meth:`~agon_env.agents.merge.MergedSet.mix`)."""
    plan = PackedPlan(model, parts)
    ids = torch.cat([p.ids.reshape(-1) for p in parts])[None]
    positions = torch.cat([p.positions.reshape(-1) for p in parts])[None]
    last = torch.cat(
        [
            at + torch.arange(p.ids.shape[0], device=ids.device) * p.ids.shape[1] + p.ids.shape[1] - 1
            for p, at in zip(parts, plan.offsets, strict=True)
        ]
    )
    # A 4-D mask is passed through as it is, so the model builds none of its own (each part has its own).
    unused = torch.ones((1, 1, 1, 1), dtype=torch.bool, device=ids.device)
    out = model(
        input_ids=ids,
        attention_mask=unused,
        position_ids=positions,
        past_key_values=PackedCache(plan),
        use_cache=True,
        logits_to_keep=last,
        packed=plan,
    )
    logits = out.logits[0]
    rows = [p.ids.shape[0] for p in parts]
    return list(torch.split(logits, rows))
