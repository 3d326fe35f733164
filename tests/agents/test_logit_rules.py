"""vLLM's per-request logit rules (``agents/logit_rules.py``) against transformers' own processors,
and in the HF decode loop: ``repetition_penalty``, ``min_p``, ``min_tokens``, ``ignore_eos`` and
``stop_token_ids`` do what vLLM's do."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import MinPLogitsWarper, RepetitionPenaltyLogitsProcessor

from agon_env.agents import logit_rules
from agon_env.agents.hf_backend import HFBackend
from agon_env.agents.protocol import SamplingParams

PROMPTS = ["What is 3 + 4?", "hi", "0 1 2"]


def test_the_repetition_penalty_is_transformers_rule():
    torch.manual_seed(0)
    logits, seen = torch.randn(2, 50), [[1, 4, 4, 30], [7]]
    params = SamplingParams(repetition_penalty=1.7)
    got = logit_rules.shape(logits, params, seen, produced=5, ending=[0])
    for row, tokens in enumerate(seen):
        want = RepetitionPenaltyLogitsProcessor(1.7)(torch.tensor([tokens]), logits[row : row + 1].clone())
        assert torch.allclose(got[row], want[0])


def test_min_p_keeps_what_transformers_min_p_keeps():
    torch.manual_seed(1)
    logits = torch.randn(3, 40) * 3
    kept = logit_rules.min_p_filter(torch.softmax(logits, -1), 0.1) > 0
    want = MinPLogitsWarper(0.1, min_tokens_to_keep=1)(None, logits.clone()) > float("-inf")
    assert torch.equal(kept, want)


def test_min_tokens_masks_the_enders_until_then_and_ignore_eos_drops_eos_from_them():
    params = SamplingParams(min_tokens=2, stop_token_ids=(5,))
    ending = logit_rules.enders([2], params)
    assert ending == [2, 5] and logit_rules.enders([2], SamplingParams(ignore_eos=True)) == []
    logits = torch.zeros(1, 8)
    assert torch.isinf(logit_rules.shape(logits, params, [[]], 1, ending)[0, [2, 5]]).all()
    assert torch.equal(logit_rules.shape(logits, params, [[]], 2, ending), logits)


def _plain_generate(base, prompts, n, **kwargs):
    tok = base.tokenizer
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = base.model.generate(
            **enc, do_sample=False, max_new_tokens=n, pad_token_id=tok.pad_token_id, **kwargs
        )
    return out[:, enc["input_ids"].shape[1] :].tolist()


def test_greedy_with_a_repetition_penalty_is_model_generates(tiny_pair):
    params = SamplingParams(max_new_tokens=12, temperature=0, stop=(), repetition_penalty=1.5)
    outs = HFBackend(tiny_pair).generate(PROMPTS, params, adapter="agent_a")
    plain = HFBackend(tiny_pair).generate(
        PROMPTS, SamplingParams(max_new_tokens=12, temperature=0, stop=()), "agent_a"
    )
    with tiny_pair.use("agent_a"):
        ref = _plain_generate(tiny_pair, PROMPTS, 12, repetition_penalty=1.5)
    for o, r in zip(outs, ref, strict=True):
        assert o.completion_ids == r[: len(o.completion_ids)]
    assert [o.completion_ids for o in outs] != [o.completion_ids for o in plain]  # it does change them


def test_min_p_of_one_samples_the_most_likely_token(tiny_pair):
    backend = HFBackend(tiny_pair)
    greedy = backend.generate(PROMPTS, SamplingParams(max_new_tokens=8, temperature=0, stop=()), "agent_a")
    for seed in (1, 2):
        hot = SamplingParams(max_new_tokens=8, temperature=1.5, stop=(), min_p=1.0, seed=seed)
        got = backend.generate(PROMPTS, hot, "agent_a")
        assert [o.completion_ids for o in got] == [o.completion_ids for o in greedy]


def test_a_stop_token_ends_a_row_and_is_kept(tiny_pair):
    backend = HFBackend(tiny_pair)
    greedy = SamplingParams(max_new_tokens=10, temperature=0, stop=())
    whole = backend.generate(PROMPTS, greedy, "agent_a")[0].completion_ids
    token = whole[3]
    got = backend.generate(
        PROMPTS, SamplingParams(**{**greedy.__dict__, "stop_token_ids": (token,)}), "agent_a"
    )[0]
    assert got.completion_ids == whole[: whole.index(token) + 1] and got.finish_reason == "stop"


@pytest.fixture
def eos_likely(tiny_pair):
    """EOS made overwhelmingly likely (a hook on the base's LM head)."""
    eos = tiny_pair.tokenizer.eos_token_id
    head = tiny_pair.base_model.lm_head
    handle = head.register_forward_hook(lambda m, i, out: out.index_fill(-1, torch.tensor([eos]), 50.0))
    yield eos
    handle.remove()


def test_ignore_eos_runs_to_the_budget_and_min_tokens_holds_eos_off_until_then(tiny_pair, eos_likely):
    backend = HFBackend(tiny_pair)
    ignoring = backend.generate(
        PROMPTS, SamplingParams(max_new_tokens=5, temperature=1.0, seed=0, ignore_eos=True), "agent_a"
    )
    assert all(len(o.completion_ids) == 5 and o.finish_reason == "length" for o in ignoring)
    held = backend.generate(
        PROMPTS, SamplingParams(max_new_tokens=8, temperature=1.0, seed=0, min_tokens=3), "agent_a"
    )
    for o in held:
        assert eos_likely not in o.completion_ids[:3] and o.completion_ids[3:] == [eos_likely]
        assert o.finish_reason == "stop"


def _full_sort_cut(probs: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-p's cut as the sampler made it before :func:`logit_rules.nucleus`: the whole row sorted."""
    values, ids = probs.sort(dim=-1, descending=True)
    return values.masked_fill((values.cumsum(-1) - values) >= top_p, 0.0), ids


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    rows=st.integers(1, 6),
    vocab=st.sampled_from([5, 64, 300, 5000]),
    sharpness=st.floats(0.1, 12.0),
    top_p=st.floats(0.05, 0.999),
    ties=st.booleans(),
)
def test_the_nucleus_is_bit_for_bit_the_full_sorts_first_places(seed, rows, vocab, sharpness, top_p, ties):
    """Flat rows (no top k reaches top_p), peaked rows (the fast path) and rows with equal
    probabilities (the fallback): the kept values, their ids where kept and the cut agree with
    sorting the whole row, and so does the token a seeded draw picks."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=g) * sharpness
    if ties:
        logits[:, 1] = logits[:, 0]  # two equal probabilities, possibly both kept
    probs = torch.softmax(logits, dim=-1)
    kept, ids = logit_rules.nucleus(probs, top_p)
    full, full_ids = _full_sort_cut(probs, top_p)
    k = kept.shape[-1]
    assert torch.equal(kept, full[:, :k]) and not full[:, k:].any()
    assert torch.equal(ids.masked_fill(kept == 0, -1), full_ids[:, :k].masked_fill(full[:, :k] == 0, -1))
    whole = torch.nn.functional.pad(kept, (0, vocab - k))
    draw = torch.multinomial(whole, 1, generator=torch.Generator().manual_seed(seed))
    before = torch.multinomial(full, 1, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(ids.gather(-1, draw), full_ids.gather(-1, before))


def test_a_peaked_row_is_cut_without_sorting_the_vocabulary(monkeypatch):
    """A SmolLM2-sized vocabulary whose nucleus is a few tokens: the fast path, never the sort."""
    logits = torch.full((8, 49152), -10.0)
    logits[:, :5] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])
    probs = torch.softmax(logits, dim=-1)
    monkeypatch.setattr(torch.Tensor, "sort", lambda *a, **k: pytest.fail("sorted the whole row"))
    kept, ids = logit_rules.nucleus(probs, 0.95)
    assert kept.shape == (8, logit_rules.NUCLEUS_TRIES[0]) and (ids[:, :3] == torch.tensor([0, 1, 2])).all()
    assert (kept[:, :3] > 0).all() and (kept[:, 5:] == 0).all()


def test_top_alternatives_are_the_most_likely_first_without_the_truncated_ones():
    logp = torch.log(torch.tensor([[0.5, 0.0, 0.2, 0.3], [0.0, 0.0, 1.0, 0.0]]))
    assert logit_rules.top_alternatives(logp, 0) is None
    top = logit_rules.top_alternatives(logp, 3)
    assert top is not None
    first = logit_rules.alternatives_of(top, 0)
    assert [t for t, _ in first] == [0, 3, 2] and first[0][1] == pytest.approx(math.log(0.5))
    assert logit_rules.alternatives_of(top, 1) == [(2, 0.0)]  # the two zeros could not be drawn
    assert (
        len(logit_rules.alternatives_of(logit_rules.top_alternatives(logp, 9), 0)) == 3
    )  # k past the vocabulary


def test_asking_for_alternatives_changes_no_sampled_token(tiny_pair):
    """The engine with ``top_logprobs``: the same tokens and log-probs as without, one list of
    alternatives per token; greedy, the sampled token leads its list."""
    backend = HFBackend(tiny_pair)
    for temperature, top_p in ((0.0, 1.0), (0.9, 0.9)):
        params = SamplingParams(max_new_tokens=6, temperature=temperature, top_p=top_p, seed=3, stop=())
        plain = backend.generate(["a b c", "d e"], params, adapter="agent_a")
        asked = backend.generate(
            ["a b c", "d e"], dataclasses.replace(params, top_logprobs=4), adapter="agent_a"
        )
        for p, a in zip(plain, asked, strict=True):
            assert a.completion_ids == p.completion_ids and a.logprobs == p.logprobs and not p.top_logprobs
            assert len(a.top_logprobs) == len(a.completion_ids)
            for token, lp, alts in zip(a.completion_ids, a.logprobs, a.top_logprobs, strict=True):
                assert 1 <= len(alts) <= 4 and [v for _, v in alts] == sorted(
                    (v for _, v in alts), reverse=True
                )
                if temperature == 0:
                    assert alts[0] == (token, lp)
