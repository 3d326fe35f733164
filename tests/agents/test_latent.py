"""The latent exchange on the tiny model: what the challenger reads, and what the update sees."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import agon_env
from agon_env.agents import HFBackend, LLMAgent
from agon_env.agents.latent import (
    PREFIX,
    DraftRecord,
    LatentAgent,
    LatentPrefix,
    compute_prefixes,
    latent_agents,
)
from agon_env.agents.latent_spans import span_tokens
from agon_env.agents.protocol import SamplingParams
from agon_env.algorithms.latent_logprobs import latent_logprobs
from agon_env.algorithms.rollout_correction import mismatch
from agon_env.episodes import Start, play_episodes
from agon_env.options import LatentConfig
from agon_env.vocabulary import VLLM_REFUSAL

SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=10)


def _agents(base, config=None):
    backend = HFBackend(base)
    plain = {n: LLMAgent(n, base, backend=backend, sampling=SAMPLING) for n in ("agent_a", "agent_b")}
    return latent_agents(plain, config or LatentConfig(span="completion"))


def _play(base, config=None, n=3):
    env = agon_env.make("agon/arith-v0", difficulty=1, exchange="latent")
    starts = [Start(i, "agent_a", i) for i in range(n)]
    return play_episodes(env, _agents(base, config), starts, lambda i, s, t: 1000 * i + t).episodes


def _update_logprobs(base, completions, adapter="agent_b"):
    with base.use(adapter):
        return latent_logprobs(base.model, completions, temperature=SAMPLING.temperature, pad_id=0)


def test_the_challenger_reads_none_of_the_drafts_text(tiny_pair):
    for ep in _play(tiny_pair):
        draft, challenge = ep.turns
        assert (
            challenge.observation["draft"].startswith("latent:")
            and challenge.completion.meta["latent_tokens"]
        )
        prompt = tiny_pair.tokenizer.decode(challenge.completion.prompt_ids)
        assert draft.text.strip() not in prompt and draft.text.strip() not in challenge.observation["text"]
        # Not even a few tokens of the draft in a row: no window of 4 draft ids is in the prompt.
        ids, p = draft.completion.completion_ids, challenge.completion.prompt_ids
        windows = {tuple(p[i : i + 4]) for i in range(len(p) - 3)}
        assert not any(tuple(ids[i : i + 4]) in windows for i in range(len(ids) - 3))


def test_sampling_and_update_logprobs_agree(tiny_pair):
    for layers in ([], [1]):
        cs = [
            ep.turns[1].completion for ep in _play(tiny_pair, LatentConfig(span="completion", layers=layers))
        ]
        logp = _update_logprobs(tiny_pair, cs)
        width = logp.shape[1]
        sampler = torch.zeros_like(logp)
        mask = torch.zeros_like(logp)
        for i, c in enumerate(cs):
            sampler[i, : len(c.logprobs)] = torch.tensor(c.logprobs)
            mask[i, : len(c.logprobs)] = 1
        m = mismatch(logp, sampler, mask, torch.ones_like(logp), 2.0)
        assert m["tokens"] == sum(len(c.logprobs) for c in cs) and width
        assert m["kl_sum"] / m["tokens"] < 1e-9 and m["abs_max"] < 1e-4  # round-off only


def test_the_logprobs_follow_the_paired_drafts_cache(tiny_pair):
    eps = _play(tiny_pair)
    c = eps[0].turns[1].completion
    same = _update_logprobs(tiny_pair, [c])
    assert torch.equal(same, _update_logprobs(tiny_pair, [c]))
    # Another draft's cache in its place (the same draft under the other adapter, then another draft).
    d = eps[0].turns[0].completion
    record = DraftRecord("agent_b", tuple(d.prompt_ids), tuple(d.completion_ids))
    other_adapter = compute_prefixes(tiny_pair, [record], LatentConfig(span="completion"))[0]
    d2 = eps[1].turns[0].completion
    other_draft = compute_prefixes(
        tiny_pair,
        [DraftRecord("agent_a", tuple(d2.prompt_ids), tuple(d2.completion_ids))],
        LatentConfig(span="completion"),
    )[0]
    empty = LatentPrefix((), (), 0)
    for prefix in (other_adapter, other_draft, empty):
        swapped = dataclasses.replace(c, meta={**c.meta, PREFIX: prefix})
        assert (_update_logprobs(tiny_pair, [swapped]) - same).abs().max() > 1e-4


def _grads(base, name):
    return [p.grad for p in base.parameters(name)]


def test_no_gradient_reaches_the_drafters_adapter_through_the_cache(tiny_pair):
    c = _play(tiny_pair, n=1)[0].turns[1].completion
    prefix = c.meta[PREFIX]
    assert all(not t.requires_grad and t.grad_fn is None for t in (*prefix.keys, *prefix.values))
    tiny_pair.model.train()
    _update_logprobs(tiny_pair, [c]).sum().backward()
    assert all(g is None or not g.any() for g in _grads(tiny_pair, "agent_a"))
    assert any(g is not None and g.abs().sum() > 0 for g in _grads(tiny_pair, "agent_b"))
    # Even a prefix that carries the drafter's graph sends nothing back: the update detaches it.
    tiny_pair.model.zero_grad(set_to_none=True)
    d = _play(tiny_pair, n=1)[0].turns[0].completion
    ids = torch.tensor([list(d.prompt_ids) + list(d.completion_ids)])
    from transformers import DynamicCache

    cache = DynamicCache()
    with tiny_pair.use("agent_a"):
        tiny_pair.model(input_ids=ids, past_key_values=cache, use_cache=True)
    n = len(d.prompt_ids)
    leaky = LatentPrefix(
        tuple(layer.keys[0, :, n:] for layer in cache.layers),
        tuple(layer.values[0, :, n:] for layer in cache.layers),
        n,
    )
    assert leaky.keys[0].requires_grad  # so the check below tests the detach, not an empty graph
    _update_logprobs(tiny_pair, [dataclasses.replace(c, meta={**c.meta, PREFIX: leaky})]).sum().backward()
    assert all(g is None or not g.any() for g in _grads(tiny_pair, "agent_a"))


def test_spans_end_before_the_answer_and_the_summary_is_its_block(tiny_base):
    tok = tiny_base.tokenizer
    text = "first 2+2. <summary>added two</summary> <answer>4</answer>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    s, e = span_tokens(tok, ids, "summary", 256)
    assert tok.decode(ids[s:e]).strip() == "<summary>added two</summary>"
    s, e = span_tokens(tok, ids, "completion", 256)
    assert (
        s == 0
        and "<answer>" not in tok.decode(ids[s:e])
        and "summary>added two</summary>" in tok.decode(ids[s:e])
    )
    assert span_tokens(tok, ids, "completion", 3) == (e - 3, e)  # the cap keeps the last tokens
    none = tok("no tags here", add_special_tokens=False)["input_ids"]
    assert span_tokens(tok, none, "summary", 256) == (len(none), len(none))  # nothing to condition on


def test_a_stored_cache_costs_what_the_model_shape_says(tiny_pair):
    c = _play(tiny_pair, n=1)[0].turns[1].completion
    cfg = tiny_pair.base_model.config
    heads = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    per_token = 2 * cfg.num_hidden_layers * heads * (cfg.hidden_size // cfg.num_attention_heads) * 4
    assert c.meta["latent_bytes"] == per_token * c.meta["latent_tokens"]


def test_smollm2_costs_46_kb_per_token():
    from agon_env.agents.models import SMOLLM2_FOLDER, cache_dir

    folder = cache_dir() / SMOLLM2_FOLDER
    if not (folder / "config.json").is_file():
        pytest.skip("SmolLM2-135M has not been converted on this machine (any --model smollm2 run does it)")
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(folder)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    assert 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 4 == 46_080


def test_vllm_is_refused_in_one_line(tiny_pair):
    agent = LLMAgent("agent_a", tiny_pair, backend=object())  # anything but the HF backend
    with pytest.raises(ValueError) as err:
        LatentAgent(agent, store=None)
    assert str(err.value) == VLLM_REFUSAL and "\n" not in VLLM_REFUSAL
