from __future__ import annotations

import pytest

import agon_env
from agon_env.agents import Agent, Completion, LLMAgent, RandomAgent, SamplingParams, ScriptedAgent
from agon_env.envs.format import parse_completion
from agon_env.vocabulary import REFERENCE, challenger_text

OBS = [
    {"text": "What is 2 + 2?", "problem": "What is 2 + 2?", "draft": "", "role": 0},
    {
        "text": challenger_text("What is 3 + 3?", "3 + 3 = 7."),
        "problem": "What is 3 + 3?",
        "draft": "3 + 3 = 7.",
        "role": 1,
    },
]


def test_all_agents_implement_the_protocol(tiny_pair):
    agents = [
        LLMAgent("agent_a", tiny_pair, sampling=SamplingParams(max_new_tokens=4, seed=0)),
        ScriptedAgent("s", "x"),
        RandomAgent("r"),
    ]
    for agent in agents:
        assert isinstance(agent, Agent)
        out = agent.act(OBS)
        assert len(out) == 2 and all(isinstance(c, Completion) and c.agent == agent.name for c in out)
        assert [c.meta["role"] for c in out] == [0, 1]
        assert agent.act([]) == []


def test_llm_agent_renders_role_prompts_and_returns_token_data(tiny_pair):
    agent = LLMAgent("alice", tiny_pair, adapter="agent_b", sampling=SamplingParams(max_new_tokens=5, seed=3))
    out = agent.act(OBS)
    assert all(len(c.completion_ids) == len(c.logprobs) > 0 and c.prompt_ids for c in out)
    assert all(c.meta["adapter"] == "agent_b" for c in out)
    challenge_prompt = tiny_pair.tokenizer.decode(out[1].prompt_ids)
    assert "3 + 3 = 7." in challenge_prompt and "re-derive" in challenge_prompt
    assert "3 + 3 = 7." not in tiny_pair.tokenizer.decode(out[0].prompt_ids)


def test_completions_record_the_temperature_they_were_sampled_at(tiny_pair):
    hot = LLMAgent("a", tiny_pair, "agent_a", sampling=SamplingParams(max_new_tokens=3, temperature=1.4))
    greedy = LLMAgent("b", tiny_pair, "agent_b", sampling=SamplingParams(max_new_tokens=3, temperature=0))
    assert [c.temperature for c in hot.act(OBS)] == [1.4, 1.4]
    assert [c.temperature for c in greedy.act(OBS)] == [0.0, 0.0]
    # Model-free agents sample nothing: no temperature unless they stand in for one that does.
    assert [c.temperature for c in ScriptedAgent("s", "x").act(OBS)] == [None, None]
    assert [c.temperature for c in ScriptedAgent("s", "x", temperature=0.5).act(OBS)] == [0.5, 0.5]
    assert [c.temperature for c in RandomAgent("r", temperature=0.8).act(OBS)] == [0.8, 0.8]


def test_llm_agent_row_seeds_replay_whatever_the_batch(tiny_pair):
    agent = LLMAgent("a", tiny_pair, "agent_a", sampling=SamplingParams(max_new_tokens=4, temperature=1))

    def ids(obs, seeds):
        return [c.completion_ids for c in agent.act(obs, seeds=seeds)]

    pair = ids(OBS[:1] * 2, [11, 12])
    assert pair == ids(OBS[:1] * 2, [11, 12])  # the same seeds replay
    assert pair[0] != pair[1]  # two seeds on one prompt: two samples
    assert ids(OBS[:1], [12]) == pair[1:]  # a row's sample does not depend on its batch


def test_llm_agent_refuses_a_missing_adapter_and_plays_the_base(tiny_pair):
    with pytest.raises(KeyError, match="no adapter 'ghost'"):
        LLMAgent("x", tiny_pair, adapter="ghost")
    ref = LLMAgent("ref", tiny_pair, adapter=REFERENCE, sampling=SamplingParams(max_new_tokens=3, seed=0))
    assert len(ref.act(OBS)) == 2


def test_scripted_agent_cycles_strings_or_calls_a_function():
    agent = ScriptedAgent("s", ["one", "two"])
    assert [c.text for c in agent.act(OBS * 2)] == ["one", "two", "one", "two"]
    echo = ScriptedAgent("e", lambda o: f"<summary>{o['problem']}</summary><answer>{o['role']}</answer>")
    assert echo.act(OBS)[1].text == "<summary>What is 3 + 3?</summary><answer>1</answer>"
    with pytest.raises(ValueError):
        ScriptedAgent("x", [])


def test_random_agent_is_seeded_and_mostly_malformed():
    a = [c.text for c in RandomAgent("r", seed=4).act(OBS * 60)]
    b = [c.text for c in RandomAgent("r", seed=4).act(OBS * 60)]
    c = [c.text for c in RandomAgent("r", seed=5).act(OBS * 60)]
    assert a == b and a != c
    ok = sum(parse_completion(t).format_ok for t in a)
    assert 0 < ok < len(a) // 2


def _play(env, agents, drafter="agent_a", seed=0):
    env.reset(seed=seed, options={"drafter": drafter})
    seen, final = {}, {}
    for name in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        if term or trunc:
            final[name] = (reward, info)
            env.step(None)
            continue
        seen[name] = obs
        env.step(agents[name].act([obs])[0])
    return seen, final


def test_tiny_llm_agents_play_a_full_episode_through_the_env(tiny_pair):
    env = agon_env.make("agon/arith-v0")
    params = SamplingParams(max_new_tokens=8, seed=0)
    agents = {n: LLMAgent(n, tiny_pair, sampling=params) for n in ("agent_a", "agent_b")}
    seen, final = _play(env, agents)
    assert seen["agent_a"]["role"] == 0 and seen["agent_b"]["role"] == 1
    assert set(final) == {"agent_a", "agent_b"}
    for _name, (reward, info) in final.items():
        assert 0 < info["tokens"] <= 8
        assert reward >= 0


def test_random_agents_never_crash_the_env():
    env = agon_env.make("agon/arith-v0")
    agents = {"agent_a": RandomAgent("agent_a", 1), "agent_b": RandomAgent("agent_b", 2)}
    for seed in range(20):
        _play(env, agents, drafter=["agent_a", "agent_b"][seed % 2], seed=seed)
