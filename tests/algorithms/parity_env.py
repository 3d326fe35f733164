"""A test env in which an untrained tiny model still gets reward variance.

A random tiny model never writes ``<answer>`` tags, so on real tasks every group has
zero variance and nothing would be updated. This wrapper (public AEC API only) turns
any completion into a well-formed one whose answer is the parity of the completion's
length, so rewards are 2.5 or 0.5 at random and depend on what the policy sampled.
Import it with ``--imports parity_env`` (tests/algorithms on PYTHONPATH).
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils.wrappers import BaseWrapper

import agon_env

ID = "test/parity-v0"


class ParityEnv(BaseWrapper):
    """Registered as a class, so ``agon_env.make`` hands it every kwarg (mode, reward_scheme...)."""

    def __init__(self, size: int = 16, inner: Any = None, **env_kwargs: Any) -> None:
        if inner is None:
            problems = [
                {"question": f"Is your reply's length even? ({i})", "answer": "0"} for i in range(size)
            ]
            inner = agon_env.make("agon/math-v0", problems=problems, **env_kwargs)
        super().__init__(inner)

    def spawn(self) -> ParityEnv:
        return ParityEnv(inner=self.env.spawn())

    def step(self, action: Any) -> None:
        if action is None:
            return self.env.step(None)
        text = action if isinstance(action, str) else action.text
        tokens = getattr(action, "num_tokens", None)
        scored = f"{text}<summary>parity</summary><answer>{len(text) % 2}</answer>"
        self.env.step(_Action(scored, tokens))


class _Action:
    def __init__(self, text: str, num_tokens: int | None) -> None:
        self.text, self.num_tokens = text, num_tokens


if ID not in agon_env.registered_ids():
    agon_env.register(ID, entry_point=ParityEnv, description="test only: reward = parity of reply length")
