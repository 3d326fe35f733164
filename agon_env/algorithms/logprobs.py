"""Per-token log-probs of sampled completions under the current policy, from token ids.

Rollouts hand over prompt and completion token ids, so nothing is re-tokenised. Each
sequence ``prompt + completion`` is *left*-padded so all sequences end at the same
position: the completion tokens are then within the last ``T + 1`` positions, and the
model only has to produce logits there (``logits_to_keep``) -- the vocabulary-sized
logits over long few-shot prompts would otherwise dominate memory.

The prompt prefix every sequence shares (the few-shot turns, and a whole group's prompt)
is run once, with gradients, and its keys/values are repeated for every row; only the
rows' own tails are then run in batch. On the default CPU workload the shared few-shot
prefix is ~75-80% of each prompt, so this removes most of the update's forward and
backward work. Gradients still reach the adapter through the prefix's keys and values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.utils.checkpoint
from torch import Tensor

from agon_env.agents.kv_cache import shared_prefix_len
from agon_env.algorithms.stream_prefix import StreamPrefix


def pad_right(rows: Sequence[Sequence[float]], width: int, value: float = 0.0) -> Tensor:
    """``[S, width]`` float tensor of ``rows`` padded with ``value`` on the right."""
    out = torch.full((len(rows), width), value, dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.float32)
    return out


def completion_mask(completion_ids: Sequence[Sequence[int]]) -> Tensor:
    width = max((len(c) for c in completion_ids), default=0)
    return pad_right([[1.0] * len(c) for c in completion_ids], width)


MIN_SHARED_PREFIX = 16
"""Shorter common prefixes are not worth a separate pass."""


def completion_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    pad_id: int = 0,
    share_prefix: bool = True,
    prefix: StreamPrefix | None = None,
) -> Tensor:
    """``[S, T]`` log-probs of each completion token (left-aligned; 0 past its end).

    Logits are divided by ``temperature`` so that, before any update, the result matches
    the log-probs the sampler reported (the importance ratio starts at exactly 1).
    ``share_prefix`` runs the common prompt prefix once (same values, less work);
    ``prefix``, when every prompt starts with it, is that prefix already run (once per stream).
    """
    lengths = [len(p) + len(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
    width = max((len(c) for c in completion_ids), default=0)
    if width == 0:
        return torch.zeros(len(lengths), 0)
    device = next(model.parameters()).device
    # transformers turns the cache off under gradient checkpointing: then run rows whole.
    checkpointing = bool(getattr(model, "is_gradient_checkpointing", False))
    shared = shared_prefix_len(prompt_ids, MIN_SHARED_PREFIX) if share_prefix and not checkpointing else 0
    if prefix is not None and prefix.covers(prompt_ids):
        shared = max(shared, len(prefix.ids))  # the micro-batch may share more than the stream
    else:
        prefix = None
    total = max(lengths) - shared  # the rows' own tails, left-padded to one width
    ids = torch.full((len(lengths), total), pad_id, dtype=torch.long)
    attn = torch.zeros((len(lengths), shared + total), dtype=torch.long)
    attn[:, :shared] = 1
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        seq = list(p[shared:]) + list(c)
        ids[i, total - len(seq) :] = torch.as_tensor(seq, dtype=torch.long)
        attn[i, shared + total - len(seq) :] = 1
    # Positions follow the real tokens, so padding between prefix and tail is invisible.
    positions = (attn.cumsum(-1) - 1).clamp(min=0)[:, shared:]
    cache = None
    if shared:
        from transformers import DynamicCache

        start = len(prefix.ids) if prefix is not None else 0
        cache = prefix.cache() if prefix is not None else DynamicCache()
        if shared > start:
            model(
                input_ids=torch.as_tensor([list(prompt_ids[0][start:shared])], device=device),
                position_ids=torch.arange(start, shared, device=device)[None],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        cache.batch_repeat_interleave(len(lengths))  # differentiable: grads flow to the prefix
    keep = width + 1
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    out = decoder(
        input_ids=ids.to(device),
        attention_mask=attn.to(device),
        position_ids=positions.to(device),
        past_key_values=cache,
        use_cache=cache is not None,
    )
    hidden = out.last_hidden_state[:, -keep:-1, :]  # position k predicts token k+1
    return completion_token_logprobs(hidden, completion_ids, head, temperature)


def completion_token_logprobs(
    hidden: Tensor,
    completion_ids: Sequence[Sequence[int]],
    head: Callable[[Tensor], Tensor],
    temperature: float,
) -> Tensor:
    """``[B, width]`` log-probs of each row's completion tokens, right-padded with 0, from
    ``hidden`` (``[B, width, H]``: the states that predict the last ``width`` tokens, the
    completions left-aligned to end together); the head runs on the real tokens only."""
    device, width = hidden.device, hidden.shape[1]
    # Completion token j of a sequence with c tokens sits at kept column width - c + j.
    cols = torch.zeros((len(completion_ids), width), dtype=torch.long)
    targets = torch.zeros((len(completion_ids), width), dtype=torch.long)
    mask = completion_mask(completion_ids).to(device)
    for i, c in enumerate(completion_ids):
        cols[i, : len(c)] = torch.arange(width - len(c), width)
        targets[i, : len(c)] = torch.as_tensor(list(c), dtype=torch.long)
    rows = torch.arange(len(completion_ids))[:, None]
    real = mask.bool()
    h = hidden[rows, cols.to(device)][real]  # [tokens, hidden]: the completion tokens only
    picked = token_logprobs(h, targets.to(device)[real], head, temperature)
    return torch.zeros_like(mask, dtype=picked.dtype).masked_scatter(real, picked)


LOGIT_CHUNK = 2**26
"""Most logits (tokens × vocabulary) in flight at once: 256 MB in fp32. One chunk at a time
keeps a 10k-token Qwen3 trace (vocabulary 152k: 6 GB of fp32 logits) from setting the peak."""


def _token_logprobs(
    h: Tensor, targets: Tensor, head: Callable[[Tensor], Tensor], temperature: float
) -> Tensor:
    logits = head(h).float()
    if temperature != 1.0:
        logits = logits / temperature
    # log_softmax gathered at the targets, without a second vocabulary-sized tensor
    return logits.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(logits, -1)


def token_logprobs(
    h: Tensor, targets: Tensor, head: Callable[[Tensor], Tensor], temperature: float = 1.0
) -> Tensor:
    """``log softmax(head(h) / T)[targets]`` for ``[N, H]`` hidden states, :data:`LOGIT_CHUNK`
    logits at a time. With gradients, each chunk beyond the first recomputes its logits in
    the backward pass (activation checkpointing) instead of keeping them."""
    vocab = int(head.weight.shape[0])
    rows = max(1, LOGIT_CHUNK // vocab)
    if h.shape[0] <= rows:
        return _token_logprobs(h, targets, head, temperature)
    grad = torch.is_grad_enabled() and h.requires_grad
    parts = []
    for i in range(0, h.shape[0], rows):
        args = (h[i : i + rows], targets[i : i + rows], head, temperature)
        if grad:
            parts.append(torch.utils.checkpoint.checkpoint(_token_logprobs, *args, use_reentrant=False))
        else:
            parts.append(_token_logprobs(*args))
    return torch.cat(parts)


def micro_batches(lengths: Sequence[int], max_rows: int, max_tokens: int | None = None) -> list[slice]:
    """Consecutive slices of at most ``max_rows`` sequences and, when set, at most
    ``max_tokens`` padded tokens (rows × the longest sequence in the slice).

    A single sequence longer than ``max_tokens`` still gets a slice of its own: the update
    runs it rather than failing. The loss weights are computed over the whole stream, so any
    split gives the same loss and gradients.
    """
    out: list[slice] = []
    start, longest = 0, 0
    for i, n in enumerate(lengths):
        wider = max(longest, n)
        rows = i - start + 1
        over = rows > max_rows or (max_tokens is not None and rows * wider > max_tokens)
        if over and i > start:
            out.append(slice(start, i))
            start, wider = i, n
        longest = wider
    if start < len(lengths):
        out.append(slice(start, len(lengths)))
    return out
