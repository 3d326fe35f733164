"""`Cascade`: the run's pair through the run's env, the same text as training's challenge mode."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest
from serving_run import write_tiny_run

import agon_env
from agon_env.agents.scripted import ScriptedAgent
from agon_env.envs.tasks.base import Problem
from agon_env.episodes import Start, play_episodes
from agon_env.serving.cascade import Cascade, CascadeError, QuestionError, recorded_direction
from agon_env.vocabulary import AGENT_A, AGENT_B

DRAFTS = {
    "plain": "Two and three. <summary>2 + 3 = 5, checked twice.</summary> <answer>5</answer>",
    # A thinking model's summary written while thinking is a thought: the reader never sees it.
    "thinking": (
        "<think>maybe <summary>secret</summary></think> Sum. <summary>adds to 5</summary><answer>5</answer>"
    ),
    "no summary": "I think it is 5. <answer>5</answer>",
}


def challenger_reads(env, drafter, challenger, index: int) -> str:
    """What the challenger reads in the env's challenge mode, played as training plays it."""
    played = play_episodes(env, {AGENT_A: drafter, AGENT_B: challenger}, [Start(index, AGENT_A, 0)])
    return played.episodes[0].challenge.observation["text"]


@pytest.mark.parametrize("kind", list(DRAFTS))
def test_the_challenger_reads_what_the_env_shows_it_in_challenge_mode(cascade, kind):
    env = agon_env.make("agon/arith-v0", difficulty=1, mode="challenge", exchange=cascade.run.exchange)
    question = env.unwrapped.task[3].prompt
    drafter = ScriptedAgent(cascade.direction[0], lambda obs: DRAFTS[kind])
    pair = dataclasses.replace(cascade, agents={**cascade.agents, cascade.direction[0]: drafter})
    got = pair.answer(question)
    expected = challenger_reads(env, drafter, cascade.agents[cascade.direction[1]], 3)
    assert got.challenger_text == expected
    assert "secret" not in got.challenger_text and "<answer>" not in got.challenger_text
    assert got.draft.completion == DRAFTS[kind] and got.question in got.challenger_text


def test_the_real_pair_reads_the_same_text_as_the_env(cascade):
    env = agon_env.make("agon/arith-v0", difficulty=1, mode="challenge", exchange=cascade.run.exchange)
    drafter, challenger = (cascade.agents[n] for n in cascade.direction)
    question = env.unwrapped.task[0].prompt
    assert cascade.answer(question).challenger_text == challenger_reads(env, drafter, challenger, 0)


def test_an_answer_has_both_stages_with_tokens_and_times(cascade):
    got = cascade.answer_many(["What is 2 + 3?", "What is 9 - 4?"], ids=["x", "y"])
    assert [g.id for g in got] == ["x", "y"]
    for g in got:
        assert g.draft.adapter == "agent_b" and g.challenge.adapter == "agent_a"  # the recorded choice
        assert 0 < g.draft.completion_tokens <= 16 and g.challenge.prompt_tokens > g.draft.prompt_tokens
        assert g.draft.seconds > 0 and g.challenge.seconds > 0 and g.correct is None
        json.dumps(g.to_dict())
    # A question's answer does not depend on what else is in the batch (per-question seeds).
    assert cascade.answer("What is 9 - 4?").challenge.completion == got[1].challenge.completion


def test_a_reference_answer_is_scored_by_the_runs_task(cascade):
    right = dataclasses.replace(
        cascade,
        agents={
            **cascade.agents,
            cascade.direction[1]: ScriptedAgent("c", ["<summary>5</summary><answer>5</answer>"]),
        },
    )
    assert right.answer("What is 2 + 3?", reference="5").correct is True
    assert right.answer("What is 2 + 3?", reference="6").correct is False


def test_a_reference_the_task_cannot_judge_is_no_wrong_answer(cascade):
    class Raises:
        def score(self, problem, answer):
            raise RuntimeError("the checker crashed")

    answering = ScriptedAgent("c", ["<summary>5</summary><answer>5</answer>"])
    agents = {**cascade.agents, cascade.direction[1]: answering}
    broken = dataclasses.replace(cascade, agents=agents, reference=Raises())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the env warns of the failure once per task (tested elsewhere)
        got = broken.answer("What is 2 + 3?", reference="5")
    assert got.correct is None  # unjudged; 86f3fbc: False, a wrong answer


def test_early_stop_shows_the_challenger_the_same_text(cascade):
    """The lever: the draft stops at </summary>; the challenger reads exactly the same."""
    full = "Work: 2+3. <summary>2 + 3 = 5.</summary> <answer>5</answer>"
    drafter = ScriptedAgent(cascade.direction[0], lambda obs: full)
    late = dataclasses.replace(
        cascade, early_stop=False, agents={**cascade.agents, cascade.direction[0]: drafter}
    )
    early = dataclasses.replace(late, early_stop=True)
    # Cut as the backend would cut it: at the stop string.
    cut = full[: full.index("</summary>") + len("</summary>")]
    early = dataclasses.replace(
        early, agents={**early.agents, cascade.direction[0]: ScriptedAgent("d", lambda o: cut)}
    )
    assert early.answer("What is 2 + 3?").challenger_text == late.answer("What is 2 + 3?").challenger_text


def test_early_stop_on_the_real_model_changes_only_where_the_draft_ends(cascade):
    early, late = cascade._drafter(), dataclasses.replace(cascade, early_stop=False)._drafter()
    assert early.sampling.stop == (*late.sampling.stop, "</summary>")
    assert late is cascade.agents[cascade.direction[0]]
    trace = dataclasses.replace(cascade, run=dataclasses.replace(cascade.run, exchange="trace"))
    assert trace._drafter() is cascade.agents[cascade.direction[0]]  # trace reads past </summary>


def test_the_direction_comes_from_the_eval_report_or_is_given(tmp_path, tiny_run):
    assert recorded_direction(tiny_run) == "cascade:agent_b>agent_a"
    bare = write_tiny_run(tmp_path / "bare")
    assert recorded_direction(bare) is None
    with pytest.raises(CascadeError, match="no cascade direction recorded"):
        Cascade.from_run(bare)
    with pytest.raises(CascadeError, match="DRAFTER>CHALLENGER"):
        Cascade.from_run(bare, direction="agent_a>agent_c")
    assert Cascade.from_run(bare, direction="agent_a>agent_b").direction == ("agent_a", "agent_b")
    assert Cascade.from_run(bare, eval_report=tiny_run / "eval" / "eval.json").direction == (
        "agent_b",
        "agent_a",
    )


def test_questions_it_cannot_take_are_refused_in_one_line(cascade):
    with pytest.raises(QuestionError, match="empty"):
        cascade.check("  ")
    with pytest.raises(QuestionError, match="max_text_length"):
        cascade.check("x" * 70_000)
    with pytest.raises(QuestionError, match="window of 2048 tokens"):
        cascade.check("What is " + "1 + " * 2000 + "1?")
    cascade.check("What is 2 + 3?")


def test_a_question_whose_challenger_prompt_overflows_is_refused_before_any_batch(cascade):
    # The challenger reads the question, its own examples and the draft: a window the draft fits in
    # can be too small for the challenge, which an engine would refuse for the whole batch.
    question = "What is 2 + 3?"
    drafter = cascade.agents[cascade.direction[0]]
    env = cascade.env([Problem("q", question, None)], mode="solo")
    env.reset(seed=0, options={"problem_index": 0})
    draft_tokens = len(cascade._counter()(drafter.render(env.observe(AGENT_A)))["input_ids"])
    narrow = dataclasses.replace(cascade, engine_window=draft_tokens + drafter.sampling.max_new_tokens + 1)
    narrow.check(question, cascade.direction[0])  # the drafter alone fits
    with pytest.raises(QuestionError, match=r"the challenger's prompt, with a draft summary of .* window of"):
        narrow.check(question)
