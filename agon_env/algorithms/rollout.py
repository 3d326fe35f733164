"""One step's rollouts: B problems × N episodes, played in lockstep, grouped into role streams.

Every episode of a step has the same drafter seat, so all envs wait on the same agent at
the same time: the drafter acts once on all B·N observations, then the challenger once
(:func:`agon_env.episodes.play_episodes`). A *stream* is one role's turns in
``(group, rollout)`` order -- the ``[B, N]`` batch its group-relative advantages are
computed over.

Seeds: episode ``i`` of the step (its global index, so a data-parallel rank plays
exactly the episodes one process would for its shard) is reset with
``derive_seed(seed, "episode", step, i)``, and its turn ``k`` by agent ``a`` samples
with ``derive_seed(seed, "sample", step, i, k, a)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from agon_env.agents.protocol import Agent
from agon_env.algorithms.distributed import DistContext, all_sum
from agon_env.algorithms.errors import TaskScoreError
from agon_env.envs.scoring import failure_of, limit_text
from agon_env.episodes import Episode, Played, Start, TaskEnv, Turn, play_episodes
from agon_env.seeding import derive_seed

if TYPE_CHECKING:
    from agon_env.envs.tasks.base import Task


@dataclass
class RolloutBatch:
    """All episodes of one step, ``group * N + rollout`` in order."""

    problem_indices: list[int]
    num_generations: int
    episodes: list[Episode]
    gen_seconds: float = 0.0
    """Time inside ``agent.act`` (generation)."""
    score_seconds: float = 0.0
    """Time inside ``env.step`` (parsing, verification, rewards)."""

    @property
    def turns(self) -> list[Turn]:
        return [t for e in self.episodes for t in e.turns]

    def stream(self, role: str) -> list[Turn]:
        """The turns of one role in ``(group, rollout)`` order: one stream's GRPO batch."""
        return [t for e in self.episodes for t in e.turns if t.role == role]

    def rewards(self, role: str) -> torch.Tensor:
        """``[B, N]`` rewards of one stream (the input to the group-relative advantages)."""
        turns = self.stream(role)
        if len(turns) != len(self.problem_indices) * self.num_generations:
            raise ValueError(f"stream {role!r} has {len(turns)} turns, not B×N; was that role played?")
        r = torch.tensor([t.reward for t in turns], dtype=torch.float32)
        return r.view(len(self.problem_indices), self.num_generations)


def rollout(
    env: TaskEnv,
    agents: Mapping[str, Agent],
    problem_indices: Sequence[int],
    num_generations: int,
    drafter: str,
    seed: int = 0,
    step: int = 0,
    episode_offset: int = 0,
) -> RolloutBatch:
    """Play ``len(problem_indices) × num_generations`` episodes in lockstep.

    ``agents`` maps seats to agents (one-seat modes only need the drafter's seat);
    ``env`` is a template that is never stepped itself. ``episode_offset`` is the global
    index of this shard's first episode.
    """
    n = num_generations
    first = episode_offset
    starts = [
        Start(int(problem_indices[i // n]), drafter, derive_seed(seed, "episode", step, first + i))
        for i in range(len(problem_indices) * n)
    ]

    def seed_of(i: int, seat: str, turn: int) -> int:
        return derive_seed(seed, "sample", step, first + i, turn, agents[seat].name)

    played: Played = play_episodes(env, agents, starts, seed_of)
    return RolloutBatch(list(problem_indices), n, played.episodes, played.acting_s, played.stepping_s)


HOPELESS_STEPS = 3
"""Steps in a row with most answers unjudged (errors or time-outs) after which a run stops."""


class ScoringWatch:
    """Stops a run whose task cannot judge its answers: it would train on noise, or on nothing.

    A step whose every answer raised stops with the first traceback; a step whose every answer
    went unjudged (time-outs among them: a scorer that hangs), or :data:`HOPELESS_STEPS` steps in
    a row with most unjudged, stop with one line naming the task, its limit and the counts. A
    few time-outs (pathological answers on a slow machine) are counted and the run goes on.
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.recent: list[tuple[int, int]] = []
        """``(unjudged, scored)`` of the last steps, each with most answers unjudged."""

    def check(self, batch: RolloutBatch, step: int, ctx: DistContext) -> None:
        scored = [t for t in batch.turns if t.answer]
        failed = [t for t in scored if t.score_error is not None]
        timeouts = [t for t in scored if t.score_timeout]
        n_failed, n_timeouts, n_scored = (
            int(v) for v in all_sum([len(failed), len(timeouts), len(scored)], ctx)
        )
        if n_scored and n_failed == n_scored:
            errors = [t.score_error for t in failed if t.score_error is not None]
            first = errors[0] if errors else "(on another rank)"
            raise TaskScoreError(
                f"step {step}: the task's score() {failure_of(first)} on all {n_scored} answers; "
                f"fix the task (first error below)\n{first}"
            )
        unjudged = n_failed + n_timeouts
        self.recent = (
            [*self.recent, (unjudged, n_scored)][-HOPELESS_STEPS:] if 2 * unjudged > n_scored else []
        )
        if n_scored and unjudged == n_scored:
            where = f"all {n_scored} answers of step {step}"
        elif len(self.recent) == HOPELESS_STEPS:
            u, n = (sum(c) for c in zip(*self.recent, strict=True))
            where = f"{u} of {n} answers over steps {step - HOPELESS_STEPS + 1}-{step}"
        else:
            return
        name = getattr(self.task, "name", type(self.task).__name__)
        raise TaskScoreError(
            f"task {name!r}: score() gave no verdict on {where} ({n_timeouts} timed out at "
            f"{limit_text(self.task)}, {n_failed} gave errors this step): scoring is hopeless, so the run "
            "stops; fix the scorer (or raise its score_timeout)"
        )


def check_trainable(turns: Sequence[Turn], max_seq_len: int, batch: RolloutBatch) -> None:
    """Refuse, naming the problem, turns the update cannot train on."""
    for t in turns:
        c = t.completion
        if not c.prompt_ids or len(c.logprobs) != len(c.completion_ids):
            raise ValueError(
                f"agent {t.seat!r} gave a completion without prompt/completion token ids and "
                "matching log-probs; GRPO trains on those (scripted agents cannot be trained)"
            )
        n = len(c.prompt_ids) + len(c.completion_ids)
        if n > max_seq_len:
            raise ValueError(
                f"problem {batch.episodes[t.episode].problem_id}: prompt + completion is {n} tokens, "
                f"over model.max_seq_len = {max_seq_len}; raise it or drop the problem"
            )
