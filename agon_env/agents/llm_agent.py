"""An LLM agent: a named adapter on a shared base, with its own prompts and sampling.

Two agents on one :class:`~agon_env.agents.adapters.SharedBase` cost one base model
plus two adapters. The agent knows nothing about training: it renders observations,
asks its backend for completions under its adapter, and returns them with token ids
and log-probs for whoever trains it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from agon_env.agents.adapters import SharedBase
from agon_env.agents.hf_backend import HFBackend, SamplingParams
from agon_env.agents.prompts import RolePrompts, render_prompt
from agon_env.agents.protocol import Completion


class Backend(Protocol):
    """What an agent needs from a generation backend (HF or vLLM)."""

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        adapter: str | Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[Completion]: ...


class LLMAgent:
    """Implements :class:`~agon_env.agents.protocol.Agent` with a LoRA adapter on a shared base."""

    def __init__(
        self,
        name: str,
        base: SharedBase,
        adapter: str | None = None,
        backend: Backend | None = None,
        sampling: SamplingParams | None = None,
        prompts: RolePrompts | None = None,
    ) -> None:
        """``adapter`` defaults to ``name``; ``"__base__"`` plays the untrained base."""
        self.name = name
        self.base = base
        self.adapter = adapter or name
        if self.adapter != "__base__" and self.adapter not in base.adapters:
            raise KeyError(
                f"agent {name!r}: no adapter {self.adapter!r} on the base; adapters: {base.adapters}"
            )
        self.backend: Backend = backend or HFBackend(base)
        self.sampling = sampling or SamplingParams()
        self.prompts = prompts or RolePrompts()
        self.calls = 0
        """Number of act() calls so far (mixed into a fixed seed; checkpoint it to resume)."""

    def render(self, observation: Mapping[str, Any]) -> str:
        return render_prompt(observation, self.base.tokenizer, self.prompts)

    def act(
        self,
        observations: Sequence[Mapping[str, Any]],
        seed: int | None = None,
        *,
        seeds: Sequence[int] | None = None,
    ) -> list[Completion]:
        """One completion per observation, sampled in one batched call.

        ``seed`` overrides ``sampling.seed`` for this call. With a fixed ``sampling.seed``
        each call still differs (the call count is mixed in), so repeated episodes are
        not clones of each other yet a run is reproducible. ``seeds`` (one per
        observation) seeds each row on its own, mixed with ``sampling.seed`` so two
        agents given the same episode seeds still draw different noise.
        """
        if not observations:
            return []
        params = self.sampling
        if seed is not None:
            params = replace(params, seed=seed)
        elif params.seed is not None:
            params = replace(params, seed=params.seed + 1_000_003 * self.calls)
        self.calls += 1
        prompts = [self.render(o) for o in observations]
        if seeds is not None:
            salt = params.seed or 0
            seeds = [(int(x) * 1_000_003 + salt) % 2**62 for x in seeds]
        completions = self.backend.generate(prompts, params, adapter=self.adapter, seeds=seeds)
        for c, o in zip(completions, observations, strict=True):
            c.agent = self.name
            c.meta.setdefault("role", int(o.get("role", 0)))
        return completions

    def __repr__(self) -> str:
        return (
            f"LLMAgent(name={self.name!r}, adapter={self.adapter!r}, backend={type(self.backend).__name__})"
        )
