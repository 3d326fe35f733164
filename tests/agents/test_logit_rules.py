"""vLLM's per-request logit rules (``agents/logit_rules.py``) against transformers' own processors,
and in the HF decode loop: ``repetition_penalty``, ``min_p``, ``min_tokens``, ``ignore_eos`` and
``stop_token_ids`` do what vLLM's do."""

from __future__ import annotations

import pytest
import torch
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
