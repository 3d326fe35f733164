from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agon_env.agents.engine import engine_for
from agon_env.agents.hf_backend import BufferCache, HFBackend
from agon_env.agents.protocol import SamplingParams
from agon_env.vocabulary import REFERENCE

PROMPTS = ["What is 3 + 4?", "Verify the draft and re-derive the result. Do not trust it.", "hi", "0 1 2"]
GREEDY = SamplingParams(max_new_tokens=12, temperature=0, stop=())
# A long common prefix, like the few-shot turns: exercises the shared-prefix prefill.
PREFIXED = ["You are a careful solver. Reason step by step. " + p for p in PROMPTS]


def _plain_generate(base, prompts, n):
    tok = base.tokenizer
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = base.model.generate(**enc, do_sample=False, max_new_tokens=n, pad_token_id=tok.pad_token_id)
    return out[:, enc["input_ids"].shape[1] :].tolist()


@pytest.mark.parametrize("prompts", [PROMPTS, PREFIXED], ids=["distinct", "shared-prefix"])
def test_greedy_matches_model_generate_with_left_padding(tiny_pair, prompts):
    backend = HFBackend(tiny_pair)
    for name in ["agent_a", REFERENCE]:
        outs = backend.generate(prompts, GREEDY, adapter=name)
        with tiny_pair.use(name):
            ref = _plain_generate(tiny_pair, prompts, 12)
        for prompt, o, r in zip(prompts, outs, ref, strict=True):
            assert o.completion_ids == r[: len(o.completion_ids)]
            assert o.prompt_ids == tiny_pair.tokenizer(prompt, add_special_tokens=False)["input_ids"]


def _recomputed_logprobs(base, adapter, prompt_ids, completion_ids, temperature, top_p=1.0):
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad(), base.use(adapter) as model:
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1]
    logp = torch.log_softmax(logits / temperature, dim=-1)
    picked = logp.gather(-1, torch.tensor(completion_ids)[:, None]).squeeze(-1)
    if top_p == 1.0:
        return picked
    # The nucleus, worked out independently: the most likely tokens until their mass reaches top_p.
    out = []
    for row, lp in zip(logp.exp(), picked, strict=True):
        kept, mass = 0.0, 0.0
        for q in sorted(row.tolist(), reverse=True):
            if mass >= top_p:
                break
            kept, mass = kept + q, mass + q
        out.append(float(lp) - math.log(kept))
    return torch.tensor(out)


@pytest.mark.parametrize("temperature,top_p,prompts", [(1.0, 1.0, PROMPTS), (0.7, 0.9, PREFIXED)])
def test_logprobs_are_those_of_the_distribution_sampled(tiny_pair, temperature, top_p, prompts):
    """Tempered log-probs a trainer recomputes; renormalised over the nucleus with top_p < 1,
    as vLLM's processed_logprobs report them (training refuses top_p < 1)."""
    backend = HFBackend(tiny_pair)
    params = SamplingParams(max_new_tokens=10, temperature=temperature, top_p=top_p, seed=0, stop=())
    for o in backend.generate(prompts, params, adapter="agent_b"):
        assert len(o.logprobs) == len(o.completion_ids) == 10 and o.finish_reason == "length"
        ref = _recomputed_logprobs(tiny_pair, "agent_b", o.prompt_ids, o.completion_ids, temperature, top_p)
        assert torch.allclose(torch.tensor(o.logprobs), ref, atol=1e-4)
        if top_p < 1:  # truncation only ever raises a kept token's probability
            full = _recomputed_logprobs(tiny_pair, "agent_b", o.prompt_ids, o.completion_ids, temperature)
            assert (torch.tensor(o.logprobs) >= full - 1e-6).all()


def test_completions_carry_the_temperature_of_their_params(tiny_pair):
    backend = HFBackend(tiny_pair)
    for t in (0.0, 0.6, 1.3):
        out = backend.generate(
            PROMPTS, SamplingParams(max_new_tokens=3, temperature=t, seed=0), adapter="agent_a"
        )
        assert [c.temperature for c in out] == [t] * len(PROMPTS)


def test_seeded_sampling_is_reproducible_and_seed_matters(tiny_pair):
    backend = HFBackend(tiny_pair)
    p = SamplingParams(max_new_tokens=8, temperature=1.0, seed=5, stop=())
    a = [o.completion_ids for o in backend.generate(PROMPTS, p, adapter="agent_a")]
    b = [o.completion_ids for o in backend.generate(PROMPTS, p, adapter="agent_a")]
    c = [
        o.completion_ids
        for o in backend.generate(PROMPTS, SamplingParams(**{**p.__dict__, "seed": 6}), "agent_a")
    ]
    assert a == b and a != c
    torch.manual_seed(1)
    d = [
        o.completion_ids
        for o in backend.generate(PROMPTS, SamplingParams(max_new_tokens=8, stop=()), "agent_a")
    ]
    torch.manual_seed(1)
    e = [
        o.completion_ids
        for o in backend.generate(PROMPTS, SamplingParams(max_new_tokens=8, stop=()), "agent_a")
    ]
    assert d == e


def test_stop_string_ends_a_row_and_is_kept(tiny_pair):
    backend = HFBackend(tiny_pair)
    free = backend.generate(
        PROMPTS, SamplingParams(max_new_tokens=30, temperature=1.0, seed=2, stop=()), "agent_a"
    )
    # Pick a stop string the unconstrained run produced mid-way, so it must cut there.
    text = free[0].text
    stop = text[len(text) // 3 : len(text) // 3 + 2]
    outs = backend.generate(
        PROMPTS, SamplingParams(max_new_tokens=30, temperature=1.0, seed=2, stop=(stop,)), "agent_a"
    )
    o = outs[0]
    assert o.finish_reason == "stop" and stop in o.text
    assert len(o.completion_ids) < len(free[0].completion_ids)
    # Nothing after the token that completed the stop string.
    assert stop not in backend.tokenizer.decode(o.completion_ids[:-1])
    assert o.completion_ids == free[0].completion_ids[: len(o.completion_ids)]
    assert o.text == backend.tokenizer.decode(o.completion_ids, skip_special_tokens=True)


def test_eos_ends_a_row_and_is_kept_with_its_logprob(tiny_pair):
    backend = HFBackend(tiny_pair)
    eos = tiny_pair.tokenizer.eos_token_id
    # Make EOS overwhelmingly likely by pushing the output bias of agent_a's LM head... the
    # head is not adapted, so instead boost EOS through the base logits with a hook.
    head = tiny_pair.base_model.lm_head
    handle = head.register_forward_hook(lambda m, i, out: out.index_fill(-1, torch.tensor([eos]), 50.0))
    try:
        outs = backend.generate(
            PROMPTS, SamplingParams(max_new_tokens=10, temperature=1.0, seed=0), "agent_a"
        )
    finally:
        handle.remove()
    for o in outs:
        assert o.completion_ids == [eos] and o.finish_reason == "stop" and o.text == ""
        assert o.logprobs[0] > -1e-3


def test_never_stopping_generation_ends_at_max_new_tokens(tiny_pair):
    outs = HFBackend(tiny_pair).generate(
        PROMPTS, SamplingParams(max_new_tokens=7, temperature=1.0, seed=0, stop=("\x00never",)), "agent_a"
    )
    assert all(o.finish_reason == "length" and len(o.completion_ids) == 7 for o in outs)


def test_batches_that_do_not_fit_are_split_with_the_same_results(tiny_pair):
    backend = HFBackend(tiny_pair)
    whole = backend.generate(PROMPTS * 3, GREEDY, adapter="agent_a")
    calls = []
    engine = engine_for(backend)
    original = engine._prefill

    def spy(rows, *args, **kwargs):  # each prefill is a chunk admitted on its own (a caller alone)
        calls.append((len(rows), max(len(r.ids) for r in rows)))
        return original(rows, *args, **kwargs)

    engine._prefill = spy
    split = backend.generate(
        PROMPTS * 3, SamplingParams(**{**GREEDY.__dict__, "max_batch_size": 5}), "agent_a"
    )
    assert [n for n, _ in calls] == [5, 5, 2]
    calls.clear()
    by_tokens = backend.generate(
        PROMPTS * 3, SamplingParams(**{**GREEDY.__dict__, "max_batch_tokens": 100}), "agent_a"
    )
    assert len(calls) > 1 and all(n * (width + 12) <= 100 or n == 1 for n, width in calls)
    for x, y, z in zip(whole, split, by_tokens, strict=True):
        assert x.completion_ids == y.completion_ids == z.completion_ids
        assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-5)


def test_mixed_adapter_batch_equals_separate_batches(tiny_pair):
    backend = HFBackend(tiny_pair)
    a = backend.generate(PROMPTS, GREEDY, adapter="agent_a")
    b = backend.generate(PROMPTS, GREEDY, adapter="agent_b")
    mixed = backend.generate(PROMPTS * 2, GREEDY, adapter=["agent_a"] * 4 + ["agent_b"] * 4)
    assert [o.completion_ids for o in mixed] == [o.completion_ids for o in a + b]
    assert [o.meta["adapter"] for o in mixed] == ["agent_a"] * 4 + ["agent_b"] * 4
    assert [o.completion_ids for o in a] != [o.completion_ids for o in b]
    with pytest.raises(ValueError, match="adapter names"):
        backend.generate(PROMPTS, GREEDY, adapter=["agent_a"])


def test_generation_keeps_train_mode_and_active_adapter(tiny_pair):
    tiny_pair.set_adapter("agent_b")
    tiny_pair.model.train()
    HFBackend(tiny_pair).generate(PROMPTS[:2], GREEDY, adapter=["agent_a", "agent_b"])
    HFBackend(tiny_pair).generate(PROMPTS[:2], GREEDY, adapter="agent_a")
    assert tiny_pair.model.training and tiny_pair.active == "agent_b"


def test_buffer_cache_matches_dynamic_cache(tiny_base):
    from transformers import DynamicCache

    model = tiny_base.model
    x = torch.tensor([[5, 6, 7, 8, 9]])
    results = []
    for cache in (DynamicCache(), BufferCache(2, capacity=3)):  # capacity 3 forces a grow
        with torch.no_grad():
            out = model(input_ids=x[:, :3], past_key_values=cache, use_cache=True)
            for t in range(3, 5):
                out = model(input_ids=x[:, t : t + 1], past_key_values=cache, use_cache=True)
        results.append(out.logits)
        assert cache.get_seq_length() == 5
    assert torch.allclose(results[0], results[1], atol=1e-6)


def test_bad_params_are_refused():
    for kwargs in ({"max_new_tokens": 0}, {"temperature": -1}, {"top_p": 0}, {"max_batch_size": 0}):
        with pytest.raises(ValueError):
            SamplingParams(**kwargs)
    assert SamplingParams(stop="</answer>").stop == ("</answer>",)


def test_empty_prompt_and_empty_batch(tiny_pair):
    backend = HFBackend(tiny_pair)
    assert backend.generate([], GREEDY) == []
    with pytest.raises(ValueError, match="empty prompt"):
        backend.generate(["hi", ""], GREEDY)


def test_shared_prefix_prefill_gives_the_same_completions(tiny_pair, monkeypatch):
    import agon_env.agents.hf_backend as hb

    prefix = "You are a careful solver. Reason step by step, then write a summary. "
    prompts = [prefix + q for q in ("What is 3 + 4?", "hi", "0 1 2 3 4 5 6 7 8 9 10", "What is 3 + 4?")]
    backend = HFBackend(tiny_pair)
    ids = [backend._encode(p) for p in prompts]
    assert backend._shared_prefix(ids, ["agent_a"] * 4) >= 10
    assert backend._shared_prefix(ids, ["agent_a", "agent_b"] * 2) == 0  # prefix KV is per adapter
    same = [ids[0]] * 3  # a GRPO group: everything but the last token is shared
    assert backend._shared_prefix(same, ["agent_a"] * 3) == len(ids[0]) - 1
    params = SamplingParams(max_new_tokens=10, temperature=1.0, seed=4, stop=())
    shared = backend.generate(prompts, params, adapter="agent_a")
    monkeypatch.setattr(hb, "MIN_SHARED_PREFIX", 10**9)  # force per-row prefill
    plain = backend.generate(prompts, params, adapter="agent_a")
    for x, y in zip(shared, plain, strict=True):
        assert x.completion_ids == y.completion_ids
        assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)
        ref = _recomputed_logprobs(tiny_pair, "agent_a", x.prompt_ids, x.completion_ids, 1.0)
        assert torch.allclose(torch.tensor(x.logprobs), ref, atol=1e-4)


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_per_row_seeds_make_a_row_independent_of_its_batch(tiny_pair, top_p):
    """What data-parallel sharding relies on: row i's sample depends on (prompt i, seed i) only."""
    backend = HFBackend(tiny_pair)
    p = SamplingParams(max_new_tokens=10, temperature=1.0, top_p=top_p, stop=())
    seeds = [11, 12, 13, 14]
    whole = [o.completion_ids for o in backend.generate(PREFIXED, p, "agent_a", seeds=seeds)]
    halves = [
        o.completion_ids
        for lo in (0, 2)
        for o in backend.generate(PREFIXED[lo : lo + 2], p, "agent_a", seeds=seeds[lo : lo + 2])
    ]
    reversed_ = [o.completion_ids for o in backend.generate(PREFIXED[::-1], p, "agent_a", seeds=seeds[::-1])]
    assert whole == halves == reversed_[::-1]
    other = [o.completion_ids for o in backend.generate(PREFIXED, p, "agent_a", seeds=[21, 22, 23, 24])]
    assert other != whole  # the seeds are really used
    with pytest.raises(ValueError, match="3 seeds for 4 prompts"):
        backend.generate(PREFIXED, p, "agent_a", seeds=seeds[:3])


def test_per_row_sampling_follows_the_distribution_and_skips_masked_tokens():
    from agon_env.agents.hf_backend import _multinomial

    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0]]).repeat(4, 1)  # zeros: top-p masked tokens
    gens = [torch.Generator().manual_seed(i) for i in range(4)]
    counts = torch.zeros(5)
    for _ in range(2500):
        counts.index_add_(0, _multinomial(probs, gens).flatten(), torch.ones(4))
    freq = counts / counts.sum()
    assert freq[1] == 0 and freq[4] == 0
    assert torch.allclose(freq, probs[0], atol=0.02)


@settings(max_examples=200, deadline=None)
@given(
    # float32 probabilities: 0 (a dropped column) or at least 1e-6, one at least above 0
    st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1.0)), min_size=1, max_size=12).filter(any),
    st.integers(0, 40),
    st.integers(0, 2**31 - 1),
)
def test_a_per_row_draw_over_the_kept_columns_is_the_draw_over_the_padded_row(kept, zeros, seed):
    """Per-row generators draw the same token from a nucleus's kept columns as from them padded
    with the dropped columns' zeros (what ``_sample`` hands ``_multinomial`` for a shared generator)."""
    from agon_env.agents.hf_backend import _multinomial

    sp = torch.tensor([sorted(kept, reverse=True)] * 3)
    whole = torch.nn.functional.pad(sp, (0, zeros))
    short = _multinomial(sp, [torch.Generator().manual_seed(seed + i) for i in range(3)])
    padded = _multinomial(whole, [torch.Generator().manual_seed(seed + i) for i in range(3)])
    assert torch.equal(short, padded) and bool((sp.gather(-1, short) > 0).all())


def test_stop_strings_wait_for_the_marker():
    from agon_env.agents.protocol import stop_end

    p = SamplingParams(stop=("</answer>",), stop_after="</think>")
    assert stop_end("<think><answer>1</answer>", p) is None  # written while thinking: no stop
    text = "<think><answer>1</answer></think><summary>s</summary><answer>2</answer> tail"
    assert text[: stop_end(text, p)].endswith("<answer>2</answer>")
    assert stop_end("<answer>1</answer>", SamplingParams()) == len("<answer>1</answer>")


def test_vllm_cut_keeps_the_tokens_up_to_the_counting_stop():
    from agon_env.agents.vllm_backend import cut_at_stop

    class CharTokenizer:  # one token per character
        def decode(self, ids, skip_special_tokens=False):
            return "".join(chr(i) for i in ids)

    text = "<think>a</answer>b</think><answer>7</answer>xyz"
    ids = [ord(c) for c in text]
    p = SamplingParams(stop=("</answer>",), stop_after="</think>")
    assert CharTokenizer().decode(ids[: cut_at_stop(CharTokenizer(), ids, p)]) == text[: -len("xyz")]
    assert cut_at_stop(CharTokenizer(), ids[:20], p) == 20  # no counting stop yet: keep everything
