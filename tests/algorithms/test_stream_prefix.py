"""The stream's prompt prefix run once and shared by its micro-batches = each micro-batch running it."""

from __future__ import annotations

import pytest
import torch

from agon_env.agents.tiny import build_tiny
from agon_env.algorithms.logprobs import completion_logprobs, micro_batches
from agon_env.algorithms.stream_prefix import MIN_STREAM_PREFIX, stream_prefix


@pytest.fixture(scope="module")
def tiny64():
    model, tok = build_tiny(seed=0)
    return model.to(torch.float64), tok


def _stream(tok):
    few_shot = tok.encode("System: reason, then answer. Example: 3 + 4 = 7. Example: 6 * 7 = 42. Now: ")
    # Two groups of three rows: a group shares its whole prompt, the stream the few-shot turns.
    prompts = [few_shot + tok.encode(q) for q in ["What is 17 + 25?"] * 3 + ["2 * 8?"] * 3]
    texts = [" <answer>42</answer>", " 12", " 16 so right", " 16", " <answer>16</answer>", " no"]
    return few_shot, prompts, [tok.encode(t) for t in texts]


def _loss_and_grads(model, tok, prompts, completions, rows, shared):
    """The trainer's accumulation: one backward per micro-batch of ``rows`` rows."""
    model.zero_grad(set_to_none=True)
    prefix = stream_prefix(model, prompts) if shared else None
    values = []
    for part in micro_batches([len(p) for p in prompts], rows):
        lp = completion_logprobs(
            model, prompts[part], completions[part], temperature=0.7, pad_id=tok.pad_token_id, prefix=prefix
        )
        (lp * torch.arange(1, lp.shape[1] + 1)).sum().backward()  # any loss that weighs tokens apart
        values.extend(row[: len(c)].tolist() for row, c in zip(lp.detach(), completions[part], strict=True))
    if prefix is not None:
        prefix.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return values, grads


@pytest.mark.parametrize("rows", [1, 2, 4, 6])
def test_the_stream_prefix_gives_the_same_values_and_gradients(tiny64, rows):
    model, tok = tiny64
    few_shot, prompts, completions = _stream(tok)
    prefix = stream_prefix(model, prompts)
    assert prefix is not None and len(prefix.ids) >= len(few_shot) >= MIN_STREAM_PREFIX
    assert prefix.covers(prompts) and not prefix.covers([few_shot])  # a row keeps its own last token
    plain, g_plain = _loss_and_grads(model, tok, prompts, completions, rows, shared=False)
    shared, g_shared = _loss_and_grads(model, tok, prompts, completions, rows, shared=True)
    assert g_plain.keys() == g_shared.keys() and len(g_plain) > 0
    # float64, but the rotary angles are float32 in transformers: a prefix run apart from its
    # row rounds differently at ~1e-8 of a gradient's scale; a lost gradient path would be ~1.
    for a, b in zip(plain, shared, strict=True):
        assert a == pytest.approx(b, abs=1e-7)
    for name, g in g_plain.items():
        assert (g - g_shared[name]).abs().max() <= 1e-6 * g.abs().max(), name


def test_no_stream_prefix_when_there_is_nothing_to_share(tiny64):
    model, tok = tiny64
    assert stream_prefix(model, [tok.encode("What is 17 + 25?")] * 1) is None  # one row
    assert stream_prefix(model, [tok.encode("What is 1?"), tok.encode("Verify it.")]) is None
    with torch.no_grad():  # without gradients nothing is kept to send back
        _, prompts, _ = _stream(tok)
        assert stream_prefix(model, prompts).sources == []
