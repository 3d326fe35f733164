from __future__ import annotations

from dataclasses import replace

import pytest

from agon_env.agents.prompts import PROMPT_FAMILIES, RolePrompts, observation_messages, render_prompt
from agon_env.agents.tiny import build_tiny_tokenizer
from agon_env.vocabulary import challenger_text

DRAFT_OBS = {"text": "What is 2 + 3?", "problem": "What is 2 + 3?", "draft": "", "role": 0}
CHALLENGE_OBS = {
    "text": challenger_text("What is 2 + 3?", "2 + 3 = 6 by counting."),
    "problem": "What is 2 + 3?",
    "draft": "2 + 3 = 6 by counting.",
    "role": 1,
}


def test_drafter_gets_two_worked_turns_then_the_question():
    msgs = observation_messages(DRAFT_OBS)
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[-1]["content"] == "What is 2 + 3?"
    for m in msgs:
        if m["role"] == "assistant":
            assert "<summary>" in m["content"] and m["content"].rstrip().endswith("</answer>")


def test_challenger_sees_problem_and_draft_and_is_told_to_verify():
    msgs = observation_messages(CHALLENGE_OBS)
    user = msgs[-1]["content"]
    assert "What is 2 + 3?" in user and "2 + 3 = 6 by counting." in user
    assert "do not trust" in user.lower() and "re-derive" in user
    assert "do not trust or paraphrase" in msgs[0]["content"].lower()
    # One worked example refutes its draft, one confirms it: checking, not contradicting.
    shots = [m["content"] for m in msgs if m["role"] == "assistant"]
    assert any("wrong" in s for s in shots) and any("right" in s for s in shots)


def test_hidden_mode_challenger_without_draft_is_rendered_as_a_draft_turn():
    obs = dict(DRAFT_OBS, role=1)  # what the env emits in hidden mode
    assert observation_messages(obs) == observation_messages(DRAFT_OBS)


def test_challenge_examples_are_worded_by_the_env():
    msgs = observation_messages(CHALLENGE_OBS)
    q, d, _ = RolePrompts().challenger_examples[0]
    assert msgs[1] == {"role": "user", "content": challenger_text(q, d)}


def test_few_shot_can_be_disabled_and_system_dropped():
    msgs = observation_messages(DRAFT_OBS, RolePrompts(few_shot=False, drafter_system=None))
    assert msgs == [{"role": "user", "content": "What is 2 + 3?"}]


def test_the_user_turn_is_the_env_text_verbatim():
    for obs in (DRAFT_OBS, CHALLENGE_OBS):
        msgs = observation_messages(obs, RolePrompts(few_shot=False))
        assert msgs[-1]["content"] == obs["text"]


def test_render_ends_with_generation_header():
    tok = build_tiny_tokenizer()
    text = render_prompt(CHALLENGE_OBS, tok)
    assert text.endswith("<|im_start|>assistant\n")
    assert text.count("<|im_start|>user") == 3


def _second_turn(mode: str) -> dict:
    import agon_env

    env = agon_env.make("agon/arith-v0", mode=mode)
    env.reset(seed=0, options={"problem_index": 0})
    env.step("work <summary>Added the two numbers.</summary><answer>1</answer>")
    return env.observe(env.agent_selection)


@pytest.mark.parametrize("family", sorted(PROMPT_FAMILIES))
def test_self_refinement_never_reads_of_a_rival(family):
    """Self mode shows the player its own draft: its system message, worked examples and turn
    all say so, while a challenge in every family still speaks of the rival's draft."""
    own, rival = _second_turn("self"), _second_turn("challenge")
    assert own["own"] == 1 and rival["own"] == 0
    for few_shot in (True, False):
        p = replace(PROMPT_FAMILIES[family], few_shot=few_shot)
        own_msgs = observation_messages(own, p)
        assert not any("rival" in m["content"].lower() for m in own_msgs), (family, own_msgs)
        assert all("own" in m["content"] for m in own_msgs if m["role"] in ("system", "user"))
        rival_msgs = observation_messages(rival, p)
        assert all("rival" in m["content"] for m in rival_msgs if m["role"] in ("system", "user"))
