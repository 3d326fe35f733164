"""A shared prompt prefix kept once in the sampling cache (issue #23): the same attention, the same tokens."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agon_env.agents import attention
from agon_env.agents.attention import prefix_attention
from agon_env.agents.hf_backend import HFBackend
from agon_env.agents.kv_cache import BufferCache
from agon_env.agents.protocol import SamplingParams

PREFIX = "You are a careful solver. Reason step by step, then write a summary and an answer. "
PROMPTS = [PREFIX + q for q in ("What is 3 + 4?", "hi", "0 1 2 3 4 5 6 7 8 9 10", "What is 17 + 25?")]


def _reference(query, key, value, pk, pv, mask):
    """The same attention as one SDPA call over the prefix copied into every row."""
    n, hkv = key.shape[0], key.shape[1]
    k = torch.cat([pk.expand(n, hkv, -1, -1), key], dim=2)
    v = torch.cat([pv.expand(n, hkv, -1, -1), value], dim=2)
    out = torch.nn.functional.scaled_dot_product_attention(query, k, v, attn_mask=mask, enable_gqa=True)
    return out.transpose(1, 2)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 5),
    hkv=st.integers(1, 3),
    g=st.integers(1, 3),
    q=st.integers(1, 4),
    p=st.integers(1, 9),
    past=st.integers(0, 6),
    pads=st.lists(st.integers(0, 3), min_size=5, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_prefix_attention_is_sdpa_over_the_copied_prefix(n, hkv, g, q, p, past, pads, seed):
    """For every shape, GQA grouping and left padding of the own tokens: SDPA's result."""
    torch.manual_seed(seed)
    s, d = past + q, 8
    query = torch.randn(n, hkv * g, q, d)
    key, value = torch.randn(n, hkv, s, d), torch.randn(n, hkv, s, d)
    pk, pv = torch.randn(1, hkv, p, d), torch.randn(1, hkv, p, d)
    # Each row's own tokens start after its padding; the prefix is always visible.
    own = torch.ones(q, s, dtype=torch.bool).tril(s - q)
    mask = torch.cat([torch.ones(n, 1, q, p, dtype=torch.bool), own.expand(n, 1, q, s).clone()], dim=-1)
    for r in range(n):
        mask[r, :, :, p : p + min(pads[r], past)] = False
    got = prefix_attention(query, key, value, pk, pv, mask)
    assert torch.allclose(got, _reference(query, key, value, pk, pv, mask), atol=1e-5)
    if all(min(x, past) == 0 for x in pads[:n]):
        # transformers passes no mask where nothing is padded: causal over the own tokens
        assert torch.allclose(prefix_attention(query, key, value, pk, pv, None), got, atol=1e-6)


def test_additive_masks_and_scaling_are_honoured():
    torch.manual_seed(0)
    query, key, value = torch.randn(2, 4, 1, 8), torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 8)
    pk, pv = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    bool_mask = torch.ones(2, 1, 1, 8, dtype=torch.bool)
    bool_mask[1, ..., 5] = False
    additive = torch.zeros(2, 1, 1, 8).masked_fill(~bool_mask, float("-inf"))
    a = prefix_attention(query, key, value, pk, pv, bool_mask, scaling=0.3)
    b = prefix_attention(query, key, value, pk, pv, additive, scaling=0.3)
    assert torch.allclose(a, b)
    assert not torch.allclose(a, prefix_attention(query, key, value, pk, pv, bool_mask))


def test_shared_prefix_cache_counts_the_prefix_and_keeps_it_once():
    cache = BufferCache(1, capacity=12)
    layer = cache.layers[0]
    layer.update(torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4))
    cache.share_prefix(3)
    assert cache.get_seq_length() == 5 and cache.shared_prefix(0)[0].shape == (1, 2, 5, 4)
    k, _ = layer.update(torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4))
    assert k.shape == (3, 2, 4, 4) and cache.get_seq_length() == 9  # the rows' own tokens only
    layer.update(torch.randn(3, 2, 6, 4), torch.randn(3, 2, 6, 4))  # past the capacity: grows
    cache.batch_select_indices(torch.tensor([0, 2]))
    assert layer.keys.shape == (2, 2, 10, 4) and cache.get_seq_length() == 15
    with pytest.raises(ValueError, match="one cached row"):
        cache.share_prefix(2)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sampling_with_the_prefix_kept_once_gives_the_same_completions(tiny_pair, temperature, monkeypatch):
    """Same tokens and log-probs as the prefix copied to every row (stop strings, EOS, rows
    leaving the batch included), and the copying path is what it replaces."""
    on, off = HFBackend(tiny_pair), HFBackend(tiny_pair, prefix_attention=False)
    assert on._prefix_once() and not off._prefix_once()
    calls = []
    counted = lambda *a, **k: calls.append(1) or prefix_attention(*a, **k)  # noqa: E731
    monkeypatch.setattr(attention, "prefix_attention", counted)
    params = SamplingParams(max_new_tokens=16, temperature=temperature, seed=3, stop=("</answer>", "?"))
    for adapter in ("agent_a", "agent_b"):
        a = on.generate(PROMPTS * 2, params, adapter=adapter)
        b = off.generate(PROMPTS * 2, params, adapter=adapter)
        for x, y in zip(a, b, strict=True):
            assert x.completion_ids == y.completion_ids and x.finish_reason == y.finish_reason
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-5)
    assert calls  # the prefix was read where it was kept


def test_the_prefix_is_kept_once_only_where_prefix_attention_reads_it(tiny_pair):
    """Another attention implementation would miss a prefix kept aside: the backend copies it."""
    backend = HFBackend(tiny_pair)
    config = tiny_pair.base_model.config
    impl = config._attn_implementation
    try:
        tiny_pair.base_model.set_attn_implementation("eager")
        assert not backend._prefix_once()
        params = SamplingParams(max_new_tokens=8, temperature=0.0, stop=())
        eager = backend.generate(PROMPTS, params, adapter="agent_a")
    finally:
        tiny_pair.base_model.set_attn_implementation(impl)
    assert backend._prefix_once()
    ours = backend.generate(PROMPTS, params, adapter="agent_a")
    assert [c.completion_ids for c in eager] == [c.completion_ids for c in ours]
