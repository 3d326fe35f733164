"""The TRL reward: the env's scoring of a draft (2c + λφ) on TRL's call, and TRL's trainer running on it."""

from __future__ import annotations

import logging
import warnings

import pytest

import agon_env
from agon_env.envs.tasks.base import Problem
from agon_env.envs.tasks.errors import VerifierError, VerifierTimeout
from agon_env.integrations.trl import AgonReward, dataset, meta_of, reward_function

QUESTION = [{"role": "user", "content": "What is 40 + 2?"}]


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_each_completion_gets_the_drafters_reward():
    reward = reward_function("agon/arith-v0")
    completions = [
        "Adding. <summary>40 + 2 = 42</summary><answer>42</answer>",  # right, formatted: 2 + 0.5
        "Adding. <summary>40 + 2 = 43</summary><answer>43</answer>",  # wrong, formatted: 0.5
        "<answer>42</answer>",  # right, no summary: 2
        "I do not know.",  # nothing to score: 0
        _chat("<summary>added</summary><answer>42</answer>"),  # a conversational completion: 2.5
    ]
    n = len(completions)
    assert reward([QUESTION] * n, completions, answer=["42"] * n) == [2.5, 0.5, 2.0, 0.0, 2.5]
    assert reward.counts == {"scored": 5, "correct": 3}
    assert reward.__name__ == "agon/arith-v0"
    # Env keywords reach the reward as they reach the env: λ = 1.
    heavier = reward_function("agon/arith-v0", lam=1.0)
    assert heavier(["What is 40 + 2?"], ["<summary>s</summary><answer>42</answer>"], answer=["42"]) == [3.0]


def test_the_gold_answer_comes_from_the_answer_column():
    reward = reward_function("agon/arith-v0")
    with pytest.raises(ValueError, match="'answer' column"):
        reward([QUESTION], [_chat("<answer>42</answer>")])


class _Flaky:
    """Scores '1' right, '2' wrong; '3' makes the verifier fail and '4' time out."""

    name = "flaky"

    def score(self, problem: Problem, answer: str) -> bool:
        if answer == "3":
            raise VerifierError("the checker crashed")
        if answer == "4":
            raise VerifierTimeout("the checker ran out of time")
        return answer == problem.answer


def test_an_answer_the_task_cannot_judge_is_no_reward_and_is_counted(caplog):
    reward = AgonReward("flaky", _Flaky(), lam=0.5)
    logged: list[tuple[str, float]] = []
    texts = [f"<summary>s</summary><answer>{a}</answer>" for a in ("1", "2", "3", "4", "3")]
    with caplog.at_level(logging.WARNING, logger="agon_env.integrations.trl"):
        got = reward(["q"] * 5, texts, answer=["1"] * 5, log_metric=lambda k, v: logged.append((k, v)))
    assert got == [2.5, 0.5, None, None, None]
    assert reward.counts == {"scored": 5, "correct": 1, "score_errors": 2, "score_timeouts": 1}
    # accuracy over the 2 judged answers, not the 5 scored (86f3fbc logged no accuracy to read)
    assert logged == [
        ("agon/score_errors", 2.0),
        ("agon/score_timeouts", 1.0),
        ("agon/unjudged", 3.0),
        ("agon/accuracy", 0.5),
    ]
    assert "3 of 5 answers not judged (2 score errors, 1 timeouts)" in caplog.text


def test_a_code_task_scores_in_its_sandbox_through_the_dataset_columns():
    rows = dataset("agon/humaneval-v0", split="test", limit=1)
    assert rows.column_names[:3] == ["prompt", "answer", "problem_id"]
    row = rows[0]  # the test bundle went through Arrow and back
    assert row["prompt"][0]["role"] == "system" and row["prompt"][-1]["content"].startswith("Complete the")
    right = row["answer"]["prompt"] + row["answer"]["reference"]
    wrong = row["answer"]["prompt"] + "    return None\n"
    reward = reward_function("agon/humaneval-v0")
    texts = [_chat(f"<summary>s</summary><answer>{code}</answer>") for code in (right, wrong)]
    got = reward([row["prompt"]] * 2, texts, answer=[row["answer"]] * 2, problem_id=[row["problem_id"]] * 2)
    assert got == [2.5, 0.5]


def test_a_task_that_checks_meta_gets_it_from_its_column():
    rows = dataset("agon/countdown-v0", limit=1)
    row = rows[0]
    numbers, target = meta_of(row["meta"])["numbers"], meta_of(row["meta"])["target"]
    reward = reward_function("agon/countdown-v0")
    text = f"<summary>s</summary><answer>{row['answer']}</answer>"
    assert reward([row["prompt"]], [text], answer=[row["answer"]], meta=[row["meta"]]) == [2.5]
    # The expression is checked against the meta's numbers and target, not read from the prompt.
    other = {"numbers": numbers, "target": target + 1}
    assert reward([row["prompt"]], [text], answer=[row["answer"]], meta=[other]) == [0.5]


def test_trls_grpo_trainer_trains_one_step_with_it(tmp_path):
    pytest.importorskip("trl", reason="TRL is an optional extra: pip install 'agon-env[bench]'")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from agon_env.agents.tiny import build_tiny

    model, tokenizer = build_tiny(seed=0)
    reward = reward_function("agon/arith-v0")
    seen: list[object] = []
    returned: list[float | None] = []
    answers: list[str] = []

    def spy(prompts, completions, **columns):
        seen.extend(completions)
        answers.extend(columns["answer"])
        returned.extend(reward(prompts, completions, **columns))
        return returned[-len(completions) :]

    spy.__name__ = "agon"
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
    )
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=spy,
            train_dataset=dataset("agon/arith-v0", limit=4),
            args=args,
        )
        assert trainer.train().global_step == 1
    finally:
        torch.set_num_threads(threads)
    # TRL called it with its own arguments: chat completions, the dataset's answer column.
    assert len(seen) == 2 and all(isinstance(c, list) and c[0]["role"] == "assistant" for c in seen)
    gold = {row["problem_id"]: row["answer"] for row in dataset("agon/arith-v0", limit=4)}
    assert set(answers) <= set(gold.values()) and reward.counts["scored"] == 2
    logged = trainer.state.log_history[0]
    assert logged["rewards/agon/mean"] == pytest.approx(sum(returned) / len(returned))
    assert logged["agon/score_errors"] == 0 and logged["agon/score_timeouts"] == 0


@pytest.mark.parametrize(
    "completion",
    [
        "<summary>s</summary><answer>42</answer>" + " " * 70_000,  # over max_text_length
        "<summary>s\ud800</summary><answer>42</answer>",  # a lone surrogate: not valid Unicode
        "<summary>s</summary><answer>42</answer>",  # inside the space: the same as the env too
    ],
    ids=["too-long", "lone-surrogate", "inside"],
)
def test_the_reward_is_the_envs_for_completions_outside_the_action_space(completion):
    # Issue 47: TRL scored these texts as written (0.5 or 2.5) where the env reads them as an empty
    # completion (0.0); both now read a completion through envs.turns.read_action.
    problems = [{"question": "What is 40 + 2?", "answer": "42"}]
    env = agon_env.make("agon/math-v0", problems=problems, mode="solo")
    env.reset(seed=0, options={"problem_index": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env.step(completion)
    reward = reward_function("agon/math-v0", problems=problems)
    assert reward(["What is 40 + 2?"], [completion], answer=["42"]) == [env.results[0].reward]
