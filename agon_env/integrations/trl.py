"""A task's verifier (or code sandbox) as a TRL reward function, and its problems as a TRL dataset.

The five lines a TRL user writes (docs/envs.md, "In TRL's GRPOTrainer")::

    from trl import GRPOConfig, GRPOTrainer
    from agon_env.integrations.trl import dataset, reward_function

    reward, train = reward_function("agon/gsm8k-v0"), dataset("agon/gsm8k-v0", split="train")
    trainer = GRPOTrainer(model="HuggingFaceTB/SmolLM2-135M-Instruct", reward_funcs=reward,
                          train_dataset=train, args=GRPOConfig(output_dir="out"))
    trainer.train()

:func:`reward_function` scores each completion as the env scores a draft, through the env's own
code (:func:`agon_env.envs.turns.read_action`: a completion outside the env's action space, over
``max_text_length`` characters or not valid Unicode, scores as an empty one;
:func:`agon_env.envs.scoring.judge`,
:func:`agon_env.envs.rewards.drafter_reward`): ``R = 2c + λφ``, with ``c`` the task's verdict on
the ``<answer>`` block against the gold answer and ``φ`` the format (``<summary>`` then
``<answer>``). TRL calls it as ``f(prompts=..., completions=..., **columns)``; the gold answer
is the dataset's ``answer`` column (``meta`` and ``problem_id`` columns are used when present:
some tasks check against the problem's ``meta``). ``meta`` is JSON text, one object per row
(:func:`meta_of` reads it back): Arrow gives a column one type, and one task's problems carry
meta values of several (pyfunc's constant ``k`` is a number for one template, a string for another).

A completion the task could not judge (``score`` raised, or its verifier timed out) is not
scored as wrong: its reward is ``None``, which TRL treats as "no reward" (the completion gets
no advantage and stays out of its group's baseline). Each such batch logs a warning with the
counts, the first error of each kind is shown once (as in the env), TRL's ``log_metric`` gets
``agon/score_errors`` and ``agon/score_timeouts`` per batch, and the function keeps running
totals in :attr:`AgonReward.counts`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agon_env.envs.rewards import drafter_reward
from agon_env.envs.scoring import judge
from agon_env.envs.spaces import UnicodeText
from agon_env.envs.tasks.base import Problem
from agon_env.envs.turns import read_action
from agon_env.json_value import JSONValue
from agon_env.options import EnvOptions
from agon_env.registry import make, with_split

if TYPE_CHECKING:
    from datasets import Dataset

    from agon_env.envs.tasks.base import Task

__all__ = ["AgonReward", "dataset", "meta_of", "reward_function"]

log = logging.getLogger(__name__)


Messages = Sequence[Mapping[str, object]]
"""A conversational TRL prompt or completion: chat messages (``role``, ``content``)."""


def _content(message: Mapping[str, object]) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    # Multimodal content: a list of parts, of which the text parts count.
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))


def completion_text(completion: str | Messages) -> str:
    """A TRL completion as text: a string, or the assistant messages of a conversational one."""
    if isinstance(completion, str):
        return completion
    return "".join(_content(m) for m in completion if m.get("role", "assistant") == "assistant")


def prompt_text(prompt: str | Messages) -> str:
    """The problem a TRL prompt asks: a string, or its last user message."""
    if isinstance(prompt, str):
        return prompt
    users = [_content(m) for m in prompt if m.get("role") == "user"]
    return users[-1] if users else ""


def meta_of(cell: str | Mapping[str, JSONValue] | None) -> dict[str, JSONValue]:
    """A ``meta`` cell as the problem's meta: the JSON text :func:`dataset` writes, or a mapping
    (a dataset a user built with ``meta`` as a struct column), or nothing."""
    if cell is None:
        return {}
    value = json.loads(cell) if isinstance(cell, str) else cell
    if not isinstance(value, Mapping):
        raise ValueError(
            f"a meta cell must hold a JSON object, got {type(value).__name__}: {str(cell)[:80]!r}"
        )
    return dict(value)


def plain(value: object) -> object:
    """``value`` with every dataclass instance in it as a dict (CodeContests' cases are
    :class:`~agon_env.envs.tasks.code_checks.IOCase`, which Arrow cannot hold)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


class AgonReward:
    """``reward(prompts, completions, answer=[...], **columns) -> list[float | None]`` for
    ``GRPOTrainer(reward_funcs=...)``, scoring with ``task`` and format weight ``lam``."""

    def __init__(self, name: str, task: Task, lam: float, space: UnicodeText | None = None) -> None:
        self.__name__ = name  # TRL logs rewards/<name>/mean
        self.task, self.lam = task, lam
        self.space = space if space is not None else UnicodeText(EnvOptions().max_text_length)
        """The env's action space: a completion outside it (too long, not valid Unicode) scores as
        an empty one, as in the env."""
        self.counts: Counter[str] = Counter()
        """Running totals: ``scored``, ``correct``, ``score_errors``, ``score_timeouts``."""

    def __call__(
        self,
        prompts: Sequence[str | Messages],
        completions: Sequence[str | Messages],
        answer: Sequence[Any] | None = None,
        meta: Sequence[str | Mapping[str, JSONValue] | None] | None = None,
        problem_id: Sequence[object] | None = None,
        log_metric: Callable[[str, float], object] | None = None,
        **_columns: Any,
    ) -> list[float | None]:
        if answer is None:
            raise ValueError(
                f"reward {self.__name__}: no answer column; TRL passes the dataset's columns as keywords, "
                "so give the dataset an 'answer' column with each prompt's gold answer"
            )
        rewards: list[float | None] = []
        batch: Counter[str] = Counter()
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            ident = str(problem_id[i]) if problem_id is not None else f"trl/{i}"
            problem = Problem(ident, prompt_text(prompt), answer[i], meta_of(meta[i] if meta else None))
            read = read_action(completion_text(completion), self.space)
            outcome, verdict = judge(self.task, problem, read.parsed, read.length)
            unjudged = "score_timeouts" if verdict.timeout else "score_errors" if verdict.error else None
            batch.update(
                ["scored", *(["correct"] if outcome.correct else []), *([unjudged] if unjudged else [])]
            )
            rewards.append(None if unjudged else drafter_reward(outcome, self.lam))
        self.counts.update(batch)
        if batch["score_errors"] or batch["score_timeouts"]:
            log.warning(
                "reward %s: %d of %d answers not judged (%d score errors, %d timeouts): reward None, "
                "not scored as wrong",
                self.__name__,
                batch["score_errors"] + batch["score_timeouts"],
                batch["scored"],
                batch["score_errors"],
                batch["score_timeouts"],
            )
        if log_metric is not None:
            for key in ("score_errors", "score_timeouts"):
                log_metric(f"agon/{key}", float(batch[key]))
            # accuracy over the judged answers only (agon_env.stats.judged): unjudged is not wrong
            judged = batch["scored"] - batch["score_errors"] - batch["score_timeouts"]
            log_metric("agon/unjudged", float(batch["scored"] - judged))
            if judged:
                log_metric("agon/accuracy", batch["correct"] / judged)
        return rewards


def reward_function(env_id: str, **kwargs: Any) -> AgonReward:
    """The reward of ``env_id``'s task for TRL's ``GRPOTrainer``: ``2c + λφ`` per completion.

    ``kwargs`` go to :func:`agon_env.make` as for the env (task keywords, and ``lam``, the
    format weight, 0.5 by default); ``env_id`` may be ``module:id``.
    """
    env = make(env_id, **kwargs)
    task = getattr(env.unwrapped, "task", None)
    if task is None or not hasattr(task, "score"):
        raise ValueError(f"{env_id} builds no task with a score() to reward with")
    seat = env.unwrapped.possible_agents[0]
    return AgonReward(env_id, task, float(env.unwrapped.lam), env.unwrapped.action_space(seat))


def dataset(
    env_id: str,
    split: str | None = "train",
    limit: int | None = None,
    family: str | None = None,
    few_shot: bool = True,
    **kwargs: Any,
) -> Dataset:
    """``env_id``'s problems of ``split`` as a ``datasets.Dataset`` for TRL: ``prompt`` (chat
    messages: the drafter's system prompt and worked examples of the task's prompt family, then
    the problem), ``answer``, ``problem_id``, and ``meta`` when the task's problems carry it (JSON
    text: :func:`meta_of` reads a cell back).

    ``kwargs`` are task keywords (``agon_env.make``); a task built without splits ignores ``split``.
    """
    from datasets import Dataset

    from agon_env.agents.prompts import observation_messages, prompts_for

    task = make(env_id, **with_split(env_id, kwargs, split)).unwrapped.task
    prompts = prompts_for(task, family, few_shot)
    problems = [task[i] for i in range(len(task) if limit is None else min(limit, len(task)))]
    rows = [
        {
            "prompt": observation_messages({"text": p.prompt, "role": 0}, prompts),
            "answer": plain(p.answer),
            "problem_id": p.id,
        }
        for p in problems
    ]
    if any(p.meta for p in problems):
        for row, p in zip(rows, problems, strict=True):
            row["meta"] = json.dumps(p.meta, sort_keys=True)
    return Dataset.from_list(rows)
