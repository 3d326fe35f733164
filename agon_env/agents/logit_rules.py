"""vLLM's per-request logit rules for the HF decode loop: pure functions of a step's logits.

``repetition_penalty`` (vLLM's and transformers' rule: a token already in the prompt or the
completion has its positive logit divided by the penalty and its negative one multiplied) and
``min_tokens`` (the tokens that would end the completion are masked until it is that long) act on
the raw logits before sampling; ``min_p`` acts on the tempered probabilities with top-k and top-p
(``HFBackend._sample``). Each is the identity at its default, so training's sampling, which
leaves them there, is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agon_env.options import SamplingParams


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
