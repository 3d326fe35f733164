"""Log-probs from token ids match what the sampler saw, for any padding."""

from __future__ import annotations

import pytest
import torch

from agon_env.agents.tiny import build_tiny
from agon_env.algorithms.logprobs import completion_logprobs


@pytest.fixture(scope="module")
def tiny():
    return build_tiny(seed=0)


def _reference(model, prompt, completion, temperature):
    # One unpadded sequence at a time: the plainest possible computation.
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1] / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_matches_unpadded_forward(tiny, temperature):
    model, tok = tiny
    prompts = [tok.encode("What is 17 + 25?"), tok.encode("Verify the draft."), tok.encode("0 1")]
    completions = [
        tok.encode(" <answer>42</answer>"),
        tok.encode(" 12"),
        tok.encode(" so the draft is right"),
    ]
    with torch.no_grad():
        got = completion_logprobs(
            model, prompts, completions, temperature=temperature, pad_id=tok.pad_token_id
        )
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            want = _reference(model, p, c, temperature)
            assert got[i, : len(c)].tolist() == pytest.approx(want.tolist(), abs=1e-5)
            assert got[i, len(c) :].abs().sum() == 0


def test_matches_generate_scores(tiny):
    model, tok = tiny
    prompt = tok("What is 17 + 25?", return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(
        **prompt,
        do_sample=True,
        temperature=0.7,
        top_k=0,
        max_new_tokens=6,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=tok.pad_token_id,
    )
    new = out.sequences[0, prompt.input_ids.shape[1] :]
    want = [torch.log_softmax(s[0], -1)[t].item() for s, t in zip(out.scores, new, strict=False)]
    with torch.no_grad():
        got = completion_logprobs(model, [prompt.input_ids[0].tolist()], [new.tolist()], temperature=0.7)
    assert got[0].tolist() == pytest.approx(want, abs=1e-4)


def test_shared_prefix_gives_the_same_values_and_gradients(tiny):
    """Running the common prompt prefix once must not change log-probs or their gradients."""
    from agon_env.agents.kv_cache import shared_prefix_len
    from agon_env.algorithms.logprobs import MIN_SHARED_PREFIX

    model, tok = tiny
    prefix = tok.encode("System: reason, then answer. Example: 3 + 4 = 7. Example: 6 * 7 = 42. Now: ")
    prompts = [prefix + tok.encode(q) for q in ("What is 17 + 25?", "5", "2 * 8?")]
    completions = [tok.encode(" <answer>42</answer>"), tok.encode(" 12"), tok.encode(" 16 so right")]
    assert shared_prefix_len(prompts, MIN_SHARED_PREFIX) >= len(prefix) >= 16
    assert shared_prefix_len(prompts[:1], MIN_SHARED_PREFIX) == 0  # one row: nothing to share
    assert (
        shared_prefix_len([prefix, prefix], MIN_SHARED_PREFIX) == len(prefix) - 1
    )  # each row keeps its last token

    def run(share):
        model.zero_grad(set_to_none=True)
        lp = completion_logprobs(
            model, prompts, completions, temperature=0.7, pad_id=tok.pad_token_id, share_prefix=share
        )
        (lp * torch.arange(1, lp.shape[1] + 1)).sum().backward()
        return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    plain, g_plain = run(False)
    shared, g_shared = run(True)
    assert torch.allclose(plain, shared, atol=1e-5)
    assert g_plain.keys() == g_shared.keys() and len(g_plain) > 0
    for name, g in g_plain.items():
        assert torch.allclose(g, g_shared[name], atol=1e-4, rtol=1e-3), name
    model.zero_grad(set_to_none=True)


def test_micro_batches_respect_rows_and_padded_tokens():
    from agon_env.algorithms.logprobs import micro_batches

    assert micro_batches([5] * 5, max_rows=2) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    # 3 rows of up to 10 tokens fit 30; the 40-token row goes alone (never dropped).
    assert micro_batches([10, 8, 10, 40, 3], max_rows=8, max_tokens=30) == [
        slice(0, 3),
        slice(3, 4),
        slice(4, 5),
    ]
    assert micro_batches([], max_rows=4) == []


def test_chunked_logits_give_the_same_values_and_gradients(tiny, monkeypatch):
    """Few logits at a time (recomputed in backward) = all at once, in value and in gradient."""
    import agon_env.algorithms.logprobs as L

    model, tok = tiny
    prompts = [tok.encode("What is 17 + 25?"), tok.encode("Verify the draft.")]
    completions = [tok.encode(" <answer>42</answer>"), tok.encode(" so the draft is right")]
    weight = next(p for n, p in model.named_parameters() if "q_proj" in n)

    def value_and_grad():
        model.zero_grad(set_to_none=True)
        weight.requires_grad_(True)
        lp = completion_logprobs(model, prompts, completions, temperature=0.7, pad_id=tok.pad_token_id)
        lp.sum().backward()
        return lp.detach(), weight.grad.clone()

    whole = value_and_grad()
    vocab = model.get_output_embeddings().weight.shape[0]
    monkeypatch.setattr(L, "LOGIT_CHUNK", 3 * vocab)  # 3 tokens per chunk
    chunked = value_and_grad()
    weight.requires_grad_(False)
    assert torch.allclose(whole[0], chunked[0], atol=1e-6)
    assert torch.allclose(whole[1], chunked[1], atol=1e-6)
