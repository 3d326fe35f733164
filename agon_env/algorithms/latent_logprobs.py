"""The update's log-probs of latent challenger completions: the same cached prefix as at sampling.

A latent challenger sampled with its paired draft's span cache before its prompt
(:mod:`agon_env.agents.latent`); the completion carries that cache, detached
(``meta["latent_prefix"]``). Here it is placed before ``prompt + completion`` exactly as the
sampler placed it -- the same tensors, the same rotary positions (the challenger's tokens
continue at the span's ``end``), the same layers attending to it -- so before any update
these log-probs equal the sampler's to round-off, and the on-policy guard
(:mod:`.rollout_correction`) measures the latent stream as any other. The prefix is a leaf
without gradient: the loss reaches only the adapter active in the update (the challenger's),
never the drafter's through its cache.

Kept apart from :func:`agon_env.algorithms.logprobs.completion_logprobs` (whose shared-prefix
reuse does not apply: every row has its own draft before its prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor
from transformers import DynamicCache

from agon_env import metric_names as M
from agon_env.agents.latent import PREFIX, LatentPrefix, prefix_layers, stack_prefixes
from agon_env.algorithms.logprobs import completion_token_logprobs

if TYPE_CHECKING:
    from agon_env.agents.protocol import Completion
    from agon_env.episodes import Turn


def latent_figures(turns: Sequence[Turn]) -> dict[str, float]:
    """The step's :data:`~agon_env.metric_names.LATENT_TOKENS`, ``LATENT_EMPTY`` and
    ``LATENT_BYTES`` (none when no turn was latent): what the stored caches cost, measured on
    the tensors, and how often a challenger had no cache to read."""
    prefixes = [t.completion.meta[PREFIX] for t in turns if PREFIX in getattr(t.completion, "meta", {})]
    if not prefixes:
        return {}
    return {
        M.LATENT_TOKENS: sum(p.length for p in prefixes) / len(prefixes),
        M.LATENT_EMPTY: sum(p.length == 0 for p in prefixes) / len(prefixes),
        M.LATENT_BYTES: float(sum(p.nbytes for p in prefixes)),
    }


def is_latent(completions: Sequence[Completion]) -> bool:
    """Whether these completions were sampled on a draft's cache (all of them must then be)."""
    return any(PREFIX in getattr(c, "meta", {}) for c in completions)


def latent_logprobs(
    model: torch.nn.Module, completions: Sequence[Completion], *, temperature: float = 1.0, pad_id: int = 0
) -> Tensor:
    """``[S, T]`` log-probs of each completion token with its stored prefix before its prompt
    (left-aligned; 0 past its end), as :func:`~agon_env.algorithms.logprobs.completion_logprobs`."""
    missing = [i for i, c in enumerate(completions) if PREFIX not in c.meta]
    if missing:
        raise ValueError(
            f"completions {missing[:3]} carry no latent prefix: a latent micro-batch must be all latent"
        )
    prefixes: list[LatentPrefix] = [c.meta[PREFIX] for c in completions]
    prompts, targets_ids = [c.prompt_ids for c in completions], [c.completion_ids for c in completions]
    width = max((len(c) for c in targets_ids), default=0)
    if width == 0:
        return torch.zeros(len(completions), 0)
    device = next(model.parameters()).device
    keys, values, pmask, ends = stack_prefixes(prefixes, device)
    seqs = [list(p) + list(c) for p, c in zip(prompts, targets_ids, strict=True)]
    total = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), total), pad_id, dtype=torch.long)
    tail = torch.zeros((len(seqs), total), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, total - len(s) :], tail[i, total - len(s) :] = torch.as_tensor(s, dtype=torch.long), 1
    tail = tail.to(device)
    positions = ends[:, None] + (tail.cumsum(-1) - 1).clamp(min=0)
    cache = None
    if keys:
        cache = DynamicCache()
        for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
            cache.update(k.detach(), v.detach(), layer)  # a leaf: no gradient into the drafter
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    with prefix_layers(model, pmask.shape[1], prefixes[0].layers):
        out = decoder(
            input_ids=ids.to(device),
            attention_mask=torch.cat([pmask, tail], dim=-1),
            position_ids=positions,
            past_key_values=cache,
            use_cache=cache is not None,
        )
    keep = width + 1
    hidden = out.last_hidden_state[:, -keep:-1, :]  # position k predicts token k+1
    return completion_token_logprobs(hidden, targets_ids, head, temperature)
