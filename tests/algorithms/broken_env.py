"""A test env whose task's ``score`` always raises (import with ``--imports broken_env``).

Wrapped like ``test/parity-v0`` so that the tiny random model's completions carry an
answer block, i.e. every turn reaches ``score``.
"""

from __future__ import annotations

from typing import Any

from parity_env import ParityEnv

import agon_env
from agon_env.envs.tasks.base import ListTask, Problem

ID = "test/broken-scorer-v0"


class Broken(ListTask):
    name = "broken-scorer"

    def score(self, problem: Problem, answer: str) -> bool:
        raise RuntimeError("this scorer is broken on purpose")


class BrokenEnv(ParityEnv):
    def __init__(self, split: str = "train", **env_kwargs: Any) -> None:
        # Its own problems per split: training refuses a pool that shares prompts with test.
        task = Broken([Problem(str(i), f"Problem {i} of {split}?", "0") for i in range(8)])
        super().__init__(inner=agon_env.make("agon/math-v0", task=task, **env_kwargs))


if ID not in agon_env.registered_ids():
    agon_env.register(ID, entry_point=BrokenEnv, description="test only: score() always raises")
