"""The prompt prefix a whole stream shares, run once per update pass instead of once per micro-batch.

:func:`~agon_env.algorithms.logprobs.completion_logprobs` already runs a micro-batch's
common prefix once; but a stream is split into micro-batches (rows, or padded tokens) and
each split repeated that prefix -- the few-shot turns, ~80 % of a challenger prompt. Here
the stream's prefix is run once, with gradients; its keys and values are handed to every
micro-batch as *leaf* tensors, whose gradients the micro-batches' backward passes sum;
:meth:`StreamPrefix.backward` then sends that sum through the prefix's own graph once.
Loss and gradients are those of the per-micro-batch path (the sum is linear), so a
micro-batch split no longer costs a prefix forward and backward each.

Kept apart from the log-prob function on purpose: other prefix caches (a latent channel's)
build on the same ``completion_logprobs(prefix=...)`` hook.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from agon_env.agents.kv_cache import shared_prefix_len

if TYPE_CHECKING:
    from transformers import DynamicCache

MIN_STREAM_PREFIX = 16
"""Shorter common prefixes are not worth a separate pass (as ``logprobs.MIN_SHARED_PREFIX``)."""


@dataclass
class StreamPrefix:
    """The keys and values of ``ids`` (one row), as leaves micro-batches attach to."""

    ids: list[int]
    """The prefix tokens every prompt of the stream starts with."""
    keys: list[Tensor]
    """Per layer ``[1, kv_heads, len(ids), head_dim]``: detached leaves that collect gradients."""
    values: list[Tensor]
    """Per layer, like :attr:`keys`."""
    sources: list[Tensor]
    """The graph-attached keys and values the leaves were cut from (empty without gradients)."""

    def cache(self) -> DynamicCache:
        """A fresh one-row ``DynamicCache`` over the leaves (the caller extends and repeats it)."""
        from transformers import DynamicCache

        return DynamicCache(list(zip(self.keys, self.values, strict=True)))

    def covers(self, prompt_ids: Sequence[Sequence[int]]) -> bool:
        n = len(self.ids)
        return all(len(p) > n and list(p[:n]) == self.ids for p in prompt_ids)

    def backward(self) -> None:
        """Send the leaves' summed gradients through the prefix forward (once), then drop them."""
        pairs = [(s, leaf.grad) for s, leaf in zip(self.sources, [*self.keys, *self.values], strict=True)]
        pairs = [(s, g) for s, g in pairs if g is not None]
        if pairs:
            torch.autograd.backward([s for s, _ in pairs], [g for _, g in pairs])
        self.sources = []


def _plain_layers(cache: DynamicCache) -> bool:
    # Sliding-window or quantised layers keep more than keys/values: not handed around here.
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


def stream_prefix(model: torch.nn.Module, prompt_ids: Sequence[Sequence[int]]) -> StreamPrefix | None:
    """Run the prefix all of ``prompt_ids`` share (None when under :data:`MIN_STREAM_PREFIX`,
    or under gradient checkpointing, where transformers turns the cache off)."""
    if bool(getattr(model, "is_gradient_checkpointing", False)):
        return None
    n = shared_prefix_len(prompt_ids, MIN_STREAM_PREFIX) if len(prompt_ids) > 1 else 0
    if not n:
        return None
    from transformers import DynamicCache

    device = next(model.parameters()).device
    ids = list(prompt_ids[0][:n])
    cache = DynamicCache()
    model(
        input_ids=torch.as_tensor([ids], device=device),
        position_ids=torch.arange(n, device=device)[None],
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    if not _plain_layers(cache):
        return None
    sources = [layer.keys for layer in cache.layers] + [layer.values for layer in cache.layers]
    grad = torch.is_grad_enabled() and any(s.requires_grad for s in sources)
    leaves = [s.detach().requires_grad_(grad) for s in sources]
    half = len(cache.layers)
    return StreamPrefix(ids, leaves[:half], leaves[half:], sources if grad else [])
