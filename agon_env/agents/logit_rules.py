"""vLLM's per-request logit rules for the HF decode loop: pure functions of a step's logits.

``repetition_penalty`` (vLLM's and transformers' rule: a token already in the prompt or the
completion has its positive logit divided by the penalty and its negative one multiplied) and
``min_tokens`` (the tokens that would end the completion are masked until it is that long) act on
the raw logits before sampling; ``min_p`` acts on the tempered probabilities with top-k and top-p
(``HFBackend._sample``). Each is the identity at its default, so training's sampling, which
leaves them there, is untouched.

:func:`nucleus` is top-p's cut, found without sorting the vocabulary where it can be: a nucleus at
top-p 0.95 is a few dozen of SmolLM2's 49,152 tokens, and a sort of them all at every step was a
cost the decode paid for nothing (weighed by ``benchmarks/decode_levers_bench.py``,
docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agon_env.options import SamplingParams

Alternatives = tuple[torch.Tensor, torch.Tensor]
"""A step's most likely tokens per row and their log-probs: ``([R, k] ids, [R, k] log-probs)``."""

NUCLEUS_TRIES = (64, 1024)
"""How many of each row's most likely tokens :func:`nucleus` looks at before it sorts them all."""


def enders(eos_ids: Sequence[int], params: SamplingParams) -> list[int]:
    """The tokens that end a completion: EOS unless ``ignore_eos``, and ``stop_token_ids``."""
    return sorted({*(() if params.ignore_eos else eos_ids), *params.stop_token_ids})


def shape(
    logits: torch.Tensor,
    params: SamplingParams,
    seen: Sequence[Sequence[int]],
    produced: int,
    ending: Sequence[int],
) -> torch.Tensor:
    """``logits`` (rows x vocabulary) with the repetition penalty and ``min_tokens``'s mask applied.

    ``seen``: each row's prompt and completion tokens so far; ``produced``: how many tokens each
    row has generated (one step: the same for all); ``ending``: :func:`enders`."""
    if params.repetition_penalty != 1.0:
        hit = torch.zeros_like(logits, dtype=torch.bool)
        vocab = logits.shape[-1]
        for row, tokens in enumerate(seen):
            ids = torch.tensor([t for t in tokens if 0 <= t < vocab], dtype=torch.long, device=logits.device)
            hit[row, ids] = True
        penalised = torch.where(
            logits > 0, logits / params.repetition_penalty, logits * params.repetition_penalty
        )
        logits = torch.where(hit, penalised, logits)
    if produced < params.min_tokens and ending:
        logits = logits.clone()
        logits[:, [t for t in ending if t < logits.shape[-1]]] = float("-inf")
    return logits


def min_p_filter(probs: torch.Tensor, min_p: float) -> torch.Tensor:
    """``probs`` with the tokens under ``min_p`` times each row's most likely one set to 0."""
    return probs.masked_fill(probs < min_p * probs.max(dim=-1, keepdim=True).values, 0.0)


def nucleus(probs: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-p's cut: ``(kept, ids)``, each row's probabilities in descending order with those past
    the smallest prefix whose mass reaches ``top_p`` set to 0 (the top token always stays), and
    their token ids. ``kept`` holds the first ``k`` of the sorted row (``k``: the first of
    :data:`NUCLEUS_TRIES` whose top ``k`` hold every row's nucleus, else the whole vocabulary).

    Bit for bit what a full sort gives in its first ``k`` places: the same values in the same
    order, so the same running sums and the same cut. Where two kept probabilities are equal
    their order is the sort's own choice, so such rows fall back to the full sort, as does a row
    whose top ``k`` do not reach ``top_p``."""
    vocab = probs.shape[-1]
    for k in NUCLEUS_TRIES:
        if k >= vocab:
            break
        values, ids = probs.topk(k, dim=-1)
        drop = (values.cumsum(-1) - values) >= top_p
        # drop[:, -1]: the top k already reach top_p (the rest of the row is dropped: the sums
        # only grow). Ties: an equal neighbour of a kept value could be ordered either way.
        tied = (values[:, 1:] == values[:, :-1]) & ~drop[:, :-1]
        if bool(drop[:, -1].all()) and not bool(tied.any()):
            return values.masked_fill(drop, 0.0), ids
    values, ids = probs.sort(dim=-1, descending=True)
    drop = (values.cumsum(-1) - values) >= top_p
    return values.masked_fill(drop, 0.0), ids


def top_alternatives(logp: torch.Tensor, k: int) -> Alternatives | None:
    """The ``k`` most likely tokens of each row of ``logp``, most likely first (``None``: ``k`` 0)."""
    if not k:
        return None
    values, ids = logp.topk(min(k, logp.shape[-1]), dim=-1)
    return ids, values


def alternatives_of(top: Alternatives, row: int) -> list[tuple[int, float]]:
    """Row ``row`` of ``top`` as ``(token, log-prob)`` pairs, leaving out the tokens truncation
    removed (log-prob ``-inf``: JSON has no such number, and they could not have been drawn)."""
    pairs = zip(top[0][row].tolist(), top[1][row].tolist(), strict=True)
    return [(i, v) for i, v in pairs if v != float("-inf")]
