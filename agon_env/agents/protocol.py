"""The agent protocol: batched observations in, :class:`Completion` objects out.

Every agent -- an LLM behind a LoRA adapter, a scripted agent in a test, a random
agent for fuzzing -- implements :class:`Agent`. Algorithms train on the token ids and
per-token log-probs a completion carries, so nothing is re-tokenised between rollout
and update.

An *observation* is exactly what the env emits for one agent:
``{"text": str, "role": int}`` (see ``agon_env.envs.draft_challenge``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Completion:
    """One sampled completion.

    ``text`` is what the env receives as the action (the env also reads ``num_tokens``
    for length statistics). Token-level fields are empty for agents that have no model.
    """

    text: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    """Per-token log-probs of ``completion_ids`` under the policy that sampled them."""
    finish_reason: str = "stop"
    """``"stop"`` (EOS or a stop string) or ``"length"`` (hit ``max_new_tokens``)."""
    agent: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int | None:
        return len(self.completion_ids) if self.completion_ids else None


@runtime_checkable
class Agent(Protocol):
    """Anything that can act in the env: ``act`` maps a batch of observations to completions.

    ``seeds``, when given, holds one sampling seed per observation. An agent that samples
    should make observation ``i``'s completion a function of ``(observation, seeds[i])``
    only, not of the rest of the batch: then a rollout gives the same episodes however it
    is batched or sharded over data-parallel processes. Agents that do not sample ignore it.
    """

    name: str

    def act(
        self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]: ...
