"""A channel's worked examples are worded as its real turn: by the channel table's ``words``
(``envs.exchange.CHANNELS``), which the observation names, not by a guess in the agents."""

from __future__ import annotations

import pytest

import agon_env
from agon_env.agents.prompts import PROMPT_FAMILIES, observation_messages
from agon_env.envs.exchange import CHANNELS

DRAFT = "<summary>Six sevens are 42.</summary><answer>42</answer>"


def _reader_turn(channel: str, mode: str) -> dict:
    """The observation of the turn that reads the draft, on ``channel`` in ``mode``."""
    env = agon_env.make("agon/arith-v0", exchange=channel, mode=mode)
    env.reset(seed=0)
    seen = []
    for _ in env.agent_iter(max_iter=2):
        obs, *_ = env.last()
        seen.append(obs)
        env.step(DRAFT)
    return seen[-1]


@pytest.mark.parametrize("mode", ["challenge", "self"])
@pytest.mark.parametrize("channel", list(CHANNELS))
def test_the_worked_examples_are_worded_by_the_channels_words(channel, mode):
    obs = _reader_turn(channel, mode)
    words = CHANNELS[channel].words
    if not obs["draft"]:  # a channel that shows nothing: the reader drafts, with the drafter's examples
        assert obs["text"] == obs["problem"]
        return
    own = bool(obs["own"])
    assert obs["text"] == words(obs["problem"], obs["draft"], own)  # the real turn
    for family, prompts in PROMPT_FAMILIES.items():
        examples = prompts.self_examples if own else prompts.challenger_examples
        user = [m["content"] for m in observation_messages(obs, prompts) if m["role"] == "user"][:-1]
        assert user == [words(q, d, own) for q, d, _ in examples], family


def test_trace_examples_say_what_the_trace_turn_says():
    obs = _reader_turn("trace", "challenge")
    user = [m["content"] for m in observation_messages(obs) if m["role"] == "user"]
    assert "in full" in user[-1] and all("in full" in u and "summarised" not in u for u in user)


def test_an_observation_naming_no_known_wording_is_refused():
    obs = {**_reader_turn("summary", "challenge"), "words": "telepathy_text"}
    with pytest.raises(ValueError, match="words='telepathy_text'"):
        observation_messages(obs)
