"""An LLM agent: a named adapter on a shared base, with its own prompts and sampling.

Two agents on one :class:`~agon_env.agents.adapters.SharedBase` cost one base model
plus two adapters. The agent knows nothing about training: it renders observations,
asks its backend for completions under its adapter, and returns them with token ids
and log-probs for whoever trains it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agon_env.agents.adapters import SharedBase
from agon_env.agents.hf_backend import HFBackend
from agon_env.agents.prompts import RolePrompts, render_prompt
from agon_env.agents.protocol import Backend, Completion, SamplingParams
from agon_env.agents.streaming import Emit
from agon_env.vocabulary import REFERENCE


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
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """``adapter`` defaults to ``name``; ``REFERENCE`` plays the untrained base."""
        self.name = name
        self.base = base
        self.adapter = adapter or name
        if self.adapter != REFERENCE and self.adapter not in base.adapters:
            raise KeyError(
                f"agent {name!r}: no adapter {self.adapter!r} on the base; adapters: {base.adapters}"
            )
        self.backend: Backend = backend or HFBackend(base)
        self.sampling = sampling or SamplingParams()
        self.prompts = prompts or RolePrompts()
        self.template_kwargs = dict(template_kwargs or {})
        """Chat-template options (``enable_thinking`` for Qwen3), the same for every prompt."""

    def render(self, observation: Mapping[str, Any]) -> str:
        return render_prompt(observation, self.base.tokenizer, self.prompts, self.template_kwargs)

    def act(
        self,
        observations: Sequence[Mapping[str, Any]],
        *,
        seeds: Sequence[int] | None = None,
        stream: Emit | None = None,
    ) -> list[Completion]:
        """One completion per observation, sampled in one batched call.

        ``seeds`` (one per observation) seeds each row on its own; the caller derives
        them (``agon_env.seeding``) from keys that include this agent, so two agents
        never share noise unless asked to. ``stream``: told ``(observation index, text)``
        as each completion is generated (the backend must stream).
        """
        if not observations:
            return []
        prompts = [self.render(o) for o in observations]
        how: dict[str, Any] = {} if stream is None else {"stream": stream}
        completions = self.backend.generate(prompts, self.sampling, adapter=self.adapter, seeds=seeds, **how)
        for c, o in zip(completions, observations, strict=True):
            c.agent = self.name
            c.meta.setdefault("role", int(o.get("role", 0)))
        return completions

    def __repr__(self) -> str:
        return (
            f"LLMAgent(name={self.name!r}, adapter={self.adapter!r}, backend={type(self.backend).__name__})"
        )
