"""The agent protocol: batched observations in, :class:`Completion` objects out.

Every agent -- an LLM behind a LoRA adapter, a scripted agent in a test, a random
agent for fuzzing -- implements :class:`Agent`. Algorithms train on the token ids and
per-token log-probs a completion carries, so nothing is re-tokenised between rollout
and update.

An *observation* is exactly what the env emits for one agent (see the draft-and-challenge
env's module docstring): ``text`` is the user turn the player reads,
``problem`` and ``draft`` are its parts, ``role`` is 0 (draft) or 1 (challenge).

:class:`SamplingParams` is the one description of how to sample, shared by training
(``TrainConfig.sampling``), evaluation and both generation backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class SamplingParams:
    """How to sample completions; the defaults are the embedded default run's."""

    temperature: float = 0.7
    """Softmax temperature; 0 means greedy. Log-probs are taken at the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass (1 disables it)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 disables it)."""
    max_new_tokens: int = 80
    """Hard cap per completion (``finish_reason="length"`` when hit); also the Dr. GRPO normaliser.

    80 fits a well-formed challenge on arith (~45-55 tokens); at 48 a third were cut off."""
    stop: tuple[str, ...] = ("</answer>",)
    """Strings that end a completion (kept in it). EOS always ends a completion."""
    stop_after: str | None = None
    """Stop strings count only after this marker: ``"</think>"`` for thinking models, so an
    ``</answer>`` written while thinking does not end the turn (``None``: anywhere)."""
    seed: int | None = None
    """Seed of one call's batch generator when the caller passes no per-row seeds.

    Training and ``agon eval`` always pass per-row seeds (``agon_env.seeding``), so
    there it has no effect; ``None`` draws from torch's global RNG."""
    max_batch_size: int = 32
    """Larger batches are split into chunks of at most this many prompts (memory, not results)."""
    max_batch_tokens: int | None = None
    """Optional cap on ``rows * (longest prompt + max_new_tokens)`` per chunk (KV memory)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {self.max_batch_size}")
        if isinstance(self.stop, str):
            self.stop = (self.stop,)
        self.stop = tuple(s for s in self.stop if s)


def stop_end(text: str, params: SamplingParams) -> int | None:
    """Where in ``text`` the completion should end: just past the first stop string that
    counts (after ``params.stop_after`` when set), or ``None`` when none has been written."""
    start = 0
    if params.stop_after:
        marker = text.find(params.stop_after)
        if marker < 0:
            return None
        start = marker + len(params.stop_after)
    ends = [i + len(s) for s in params.stop if (i := text.find(s, start)) >= 0]
    return min(ends) if ends else None


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
    temperature: float | None = None
    """The softmax temperature it was sampled at (0: greedy), as the backend received it, so
    a per-adapter temperature can be checked on the samples themselves; ``None`` from an
    agent that does not sample (a scripted agent told none)."""

    @property
    def num_tokens(self) -> int | None:
        return len(self.completion_ids) if self.completion_ids else None


@runtime_checkable
class Agent(Protocol):
    """Anything that can act in the env: ``act`` maps a batch of observations to completions.

    ``seeds``, when given, holds one sampling seed per observation. An agent that samples
    must make observation ``i``'s completion a function of ``(observation, seeds[i])``
    only, not of the rest of the batch: then a rollout gives the same episodes however it
    is batched or sharded over data-parallel processes. Agents that do not sample ignore it.
    """

    name: str

    def act(
        self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]: ...
