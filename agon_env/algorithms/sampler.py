"""Which problems a step trains on: seeded epochs over the task, resumable by position."""

from __future__ import annotations

import random
from collections.abc import Mapping

from agon_env.seeding import derive_seed


class ProblemSampler:
    """Shuffled passes over ``range(size)``; its whole state is ``(epoch, position)``.

    Each epoch's order is a pure function of ``(seed, epoch)``, so a checkpoint needs only
    two integers to continue the exact same stream of problems after a restart.
    """

    def __init__(self, size: int, seed: int = 0) -> None:
        if size < 1:
            raise ValueError("the task has no problems to sample")
        self.size, self.seed = size, seed
        self.epoch, self.position = 0, 0
        self._order = self._shuffled(0)

    def _shuffled(self, epoch: int) -> list[int]:
        order = list(range(self.size))
        random.Random(derive_seed(self.seed, "epoch", epoch)).shuffle(order)
        return order

    def take(self, count: int) -> list[int]:
        out = []
        for _ in range(count):
            if self.position == self.size:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._shuffled(self.epoch)
            out.append(self._order[self.position])
            self.position += 1
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "size": self.size, "seed": self.seed}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        if (state["size"], state["seed"]) != (self.size, self.seed):
            raise ValueError(
                f"data position is for a task of {state['size']} problems with seed {state['seed']}, "
                f"not {self.size} with seed {self.seed}"
            )
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._shuffled(self.epoch)
