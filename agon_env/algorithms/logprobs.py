"""Per-token log-probs of sampled completions under the current policy, from token ids.

Rollouts hand over prompt and completion token ids, so nothing is re-tokenised. Each
sequence ``prompt + completion`` is *left*-padded so all sequences end at the same
position: the completion tokens are then within the last ``T + 1`` positions, and the
model only has to produce logits there (``logits_to_keep``) -- the vocabulary-sized
logits over long few-shot prompts would otherwise dominate memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor


def pad_right(rows: Sequence[Sequence[float]], width: int, value: float = 0.0) -> Tensor:
    """``[S, width]`` float tensor of ``rows`` padded with ``value`` on the right."""
    out = torch.full((len(rows), width), value, dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.float32)
    return out


def completion_mask(completion_ids: Sequence[Sequence[int]]) -> Tensor:
    width = max((len(c) for c in completion_ids), default=0)
    return pad_right([[1.0] * len(c) for c in completion_ids], width)


def completion_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    pad_id: int = 0,
) -> Tensor:
    """``[S, T]`` log-probs of each completion token (left-aligned; 0 past its end).

    Logits are divided by ``temperature`` so that, before any update, the result matches
    the log-probs the sampler reported (the importance ratio starts at exactly 1).
    """
    lengths = [len(p) + len(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
    width = max((len(c) for c in completion_ids), default=0)
    if width == 0:
        return torch.zeros(len(lengths), 0)
    total = max(lengths)
    device = next(model.parameters()).device
    ids = torch.full((len(lengths), total), pad_id, dtype=torch.long)
    attn = torch.zeros((len(lengths), total), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        seq = list(p) + list(c)
        ids[i, total - len(seq) :] = torch.as_tensor(seq, dtype=torch.long)
        attn[i, total - len(seq) :] = 1
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    keep = width + 1
    out = model(
        input_ids=ids.to(device),
        attention_mask=attn.to(device),
        position_ids=positions.to(device),
        logits_to_keep=keep,
        use_cache=False,
    )
    logits = out.logits[:, -keep:-1, :].float() / temperature  # position k predicts token k+1
    logp_all = torch.log_softmax(logits, dim=-1)
    # Completion token j of a sequence with c tokens sits at kept column width - c + j.
    cols = torch.zeros((len(lengths), width), dtype=torch.long)
    targets = torch.zeros((len(lengths), width), dtype=torch.long)
    mask = completion_mask(completion_ids)
    for i, c in enumerate(completion_ids):
        cols[i, : len(c)] = torch.arange(width - len(c), width)
        targets[i, : len(c)] = torch.as_tensor(list(c), dtype=torch.long)
    rows = torch.arange(len(lengths))[:, None]
    picked = logp_all[rows, cols.to(device)].gather(-1, targets.to(device)[..., None]).squeeze(-1)
    return picked * mask.to(device)
