"""The parity env (``parity_env``) for the latent exchange: the handle names the agent's own text.

The parity wrapper appends a summary and an answer to every completion before the inner env
scores it, so the inner env would name the draft by that longer text; the drafter recorded
its cache under its own completion's text. This wrapper hands the challenger the handle of
what the drafter wrote. Import it with ``--imports latent_parity_env``.
"""

from __future__ import annotations

from typing import Any

from parity_env import ParityEnv

import agon_env
from agon_env.vocabulary import draft_handle, is_handle

ID = "test/parity-latent-v0"


class LatentParityEnv(ParityEnv):
    def __init__(self, size: int = 16, inner: Any = None, **env_kwargs: Any) -> None:
        super().__init__(size, inner, **env_kwargs)
        self._written: list[str] = []

    def spawn(self) -> LatentParityEnv:
        return LatentParityEnv(inner=self.env.spawn())

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._written = []
        super().reset(seed=seed, options=options)

    def step(self, action: Any) -> None:
        if action is not None:
            self._written.append(action if isinstance(action, str) else action.text)
        super().step(action)

    def observe(self, agent: str) -> Any:
        obs = super().observe(agent)
        if is_handle(obs.get("draft")) and self._written:
            obs = {**obs, "draft": draft_handle(obs["problem"], self._written[0])}
        return obs


if ID not in agon_env.registered_ids():
    agon_env.register(ID, entry_point=LatentParityEnv, description="test only: parity env, latent handles")
