"""Every task family gets its own instructions and worked examples, never another family's."""

from __future__ import annotations

import json
import re

import pytest

import agon_env
from agon_env.agents.prompts import (
    PROMPT_FAMILIES,
    RolePrompts,
    family_of,
    prompts_for,
    register_prompt_family,
    render_prompt,
)
from agon_env.agents.tiny import build_tiny_tokenizer
from agon_env.envs.format import parse_completion
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.math import deepmath
from agon_env.envs.tasks.verify import mentions_answer

ARITH_MARKERS = ("What is 3 + 4?", "Multiplied 6 by 7", "What is 5 + 8?")


def rendered(env_id: str, **kwargs) -> tuple[str, list[str]]:
    env = agon_env.make(env_id, **kwargs)
    env.reset(seed=0, options={"problem_index": 0})
    obs = env.observe(env.agent_selection)
    env.step("work <summary>a method</summary><answer>1</answer>")
    challenge = env.observe(env.agent_selection)
    tok = build_tiny_tokenizer()
    prompts = prompts_for(env.task)
    return family_of(env.task), [render_prompt(o, tok, prompts) for o in (obs, challenge)]


@pytest.mark.parametrize(
    ("env_id", "kwargs", "family"),
    [
        ("agon/arith-v0", {}, "arithmetic"),
        ("agon/math-v0", {"problems": [{"question": "Find $x$ if $x + 1 = 3$.", "answer": "2"}]}, "math"),
        ("agon/humaneval-v0", {"limit": 1}, "code-function"),
    ],
)
def test_each_builtin_task_renders_its_own_family(env_id, kwargs, family):
    got, texts = rendered(env_id, **kwargs)
    assert got == family
    for text in texts:
        assert any(m in text for m in ARITH_MARKERS) == (family == "arithmetic")
    assert "```python" in texts[0] if family.startswith("code") else "```python" not in texts[0]


def test_the_data_tasks_name_their_families(tmp_path):
    path = tmp_path / "dm.jsonl"
    path.write_text(json.dumps({"question": "Q?", "final_answer": "3", "difficulty": 9}) + "\n")
    assert family_of(deepmath(path=str(path), split=None)) == "math"
    if local_file("gsm8k_test.jsonl"):
        assert family_of(agon_env.make("agon/gsm8k-v0", split="test").task) == "math"
    if local_file("codecontests_sample.jsonl"):
        _, texts = rendered("agon/codecontests-v0", limit=1)
        assert "stdin" in texts[0] and not any(m in texts[0] for m in ARITH_MARKERS)


def test_few_shot_off_and_an_explicit_or_registered_family():
    class Riddles:
        name = "riddles"
        prompt_family = "riddles"

    plain = prompts_for(object(), few_shot=False)  # a task naming no family: math
    assert plain.drafter_system == PROMPT_FAMILIES["math"].drafter_system and not plain.few_shot
    assert prompts_for(object(), "code-stdio") == PROMPT_FAMILIES["code-stdio"]
    with pytest.raises(ValueError, match="unknown prompt family 'riddles'"):
        prompts_for(Riddles())
    register_prompt_family("riddles-test", RolePrompts(drafter_system="Solve the riddle."))
    assert prompts_for(object(), "riddles-test").drafter_system == "Solve the riddle."
    with pytest.raises(ValueError, match="already registered"):
        register_prompt_family("riddles-test", RolePrompts())


@pytest.mark.parametrize("family", sorted(PROMPT_FAMILIES))
def test_every_worked_example_is_well_formed(family):
    p = PROMPT_FAMILIES[family]
    for _, completion in p.drafter_examples:
        assert parse_completion(completion).format_ok
    for _, _, completion in _reading_examples(p):
        assert parse_completion(completion).format_ok


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def _reading_examples(p: RolePrompts) -> list[tuple[str, str, str]]:
    return [*p.challenger_examples, *p.self_examples]


@pytest.mark.parametrize("family", sorted(PROMPT_FAMILIES))
def test_no_worked_summary_states_its_result(family):
    """The summary is what the other turn reads: an example that puts the result in it teaches
    the model to hand the answer over (the replication measured the leak), so every family's
    examples summarise the method; the shown drafts of the reading examples are summaries too."""
    p = PROMPT_FAMILIES[family]
    shots = [(q, a) for q, a in p.drafter_examples] + [(q, a) for q, _, a in _reading_examples(p)]
    for question, completion in shots:
        parsed = parse_completion(completion)
        assert not mentions_answer(parsed.summary, parsed.answer), (family, parsed.summary)
        if re.fullmatch(r"-?\d+", parsed.answer):  # nor an intermediate result
            assert _numbers(parsed.summary) <= _numbers(question), (family, parsed.summary)
    for question, draft, completion in _reading_examples(p):
        answer = parse_completion(completion).answer
        assert not mentions_answer(draft, answer), (family, draft)
        if re.fullmatch(r"-?\d+", answer):
            # A numeric draft states no number the question does not hold: not even its own
            # (wrong) result, which a reader would otherwise learn to copy or contradict.
            assert _numbers(draft) <= _numbers(question), (family, draft)


@pytest.mark.parametrize("family", sorted(PROMPT_FAMILIES))
def test_every_family_asks_for_a_method_summary(family):
    p = PROMPT_FAMILIES[family]
    for system in (p.drafter_system, p.challenger_system, p.self_system):
        assert "of your method (not its result)" in system, (family, system)


def test_a_task_without_a_family_is_told_once_that_it_gets_math() -> None:
    import warnings

    from agon_env.agents.prompts import family_of

    class Vowels:
        name = "vowels-without-family"

    with pytest.warns(UserWarning, match="names no prompt_family: agents use the 'math' family"):
        assert family_of(Vowels()) == "math"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time is silent
        assert family_of(Vowels()) == "math"
        assert family_of(Vowels(), "arithmetic") == "arithmetic"
