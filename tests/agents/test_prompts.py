from __future__ import annotations

from agon_env.agents.prompts import RolePrompts, observation_messages, render_prompt
from agon_env.agents.tiny import build_tiny_tokenizer
from agon_env.envs.exchange import challenger_text

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
