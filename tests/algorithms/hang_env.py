"""A test env whose task's ``score`` never returns (import with ``--imports hang_env``).

Wrapped like ``test/parity-v0`` so that the tiny random model's completions carry an answer
block, i.e. every turn reaches ``score``; its ``score_timeout`` is short so a test runs fast.
"""

from __future__ import annotations

import threading
from typing import Any

from parity_env import ParityEnv

import agon_env
from agon_env.envs.tasks.base import ListTask, Problem

ID = "test/hanging-scorer-v0"


class Hangs(ListTask):
    name = "hanging-scorer"
    score_timeout = 0.2

    def score(self, problem: Problem, answer: str) -> bool:
        threading.Event().wait()  # never set: stuck for good
        return True


class HangEnv(ParityEnv):
    def __init__(self, split: str = "train", **env_kwargs: Any) -> None:
        # Its own problems per split: training refuses a pool that shares prompts with test.
        task = Hangs([Problem(str(i), f"Problem {i} of {split}?", "0") for i in range(8)])
        super().__init__(inner=agon_env.make("agon/math-v0", task=task, **env_kwargs))


if ID not in agon_env.registered_ids():
    agon_env.register(ID, entry_point=HangEnv, description="test only: score() never returns")
