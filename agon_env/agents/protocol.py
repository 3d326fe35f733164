"""The agent protocol: batched observations in, :class:`Completion` objects out.

Every agent -- an LLM behind a LoRA adapter, a scripted agent in a test, a random
agent for fuzzing -- implements :class:`Agent`. Algorithms train on the token ids and
per-token log-probs a completion carries, so nothing is re-tokenised between rollout
and update.

An *observation* is exactly what the env emits for one agent (see the draft-and-challenge
env's module docstring): ``text`` is the user turn the player reads,
``problem`` and ``draft`` are its parts, ``role`` is 0 (draft) or 1 (challenge).

:class:`~agon_env.options.SamplingParams` (defined at the floor, so a run's config can hold
it) is the one description of how to sample, shared by training, evaluation and both
generation backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agon_env.options import SamplingParams

__all__ = ["Agent", "Backend", "Completion", "SamplingParams", "completion_text", "stop_end"]


def completion_text(tokenizer: Any, token_ids: Sequence[int]) -> str:
    """The one decoding rule: a completion's text is its token ids decoded *without* special
    tokens (``<|im_start|>``, EOS, ...).

    Every backend's :attr:`Completion.text`, every streamed piece
    (:mod:`agon_env.agents.streaming`) and the latent span's character positions
    (:mod:`agon_env.agents.latent_spans`) read a draft through this, so the text channels and the
    latent one judge the same text: a summary of only special tokens is empty in both, an
    EOS-only draft gives nothing in both, and a special token inside a tag splits it in neither.
    """
    return tokenizer.decode(list(token_ids), skip_special_tokens=True)


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
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    """When asked (``SamplingParams.top_logprobs``), each step's most likely tokens and their
    log-probs, most likely first, under the distribution ``logprobs`` reads (tokens truncation
    removed are not listed); else empty."""
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


@runtime_checkable
class Backend(Protocol):
    """A generation engine over a shared base (HF or vLLM: ``agon_env.runtime.BACKENDS``).

    One that keeps its own copy of the adapters (vLLM) also has ``sync(adapter)``, called after
    every update, and ``versions`` (adapter -> the version it serves), read by the on-policy guard.
    One that streams also takes ``stream`` (:mod:`agon_env.agents.streaming`); an agent passes it
    only when asked to stream. The one protocol of a backend: agents, the trainer and the
    server all name this one.
    """

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        adapter: str | Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[Completion]: ...
