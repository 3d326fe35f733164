"""Agents: one frozen base with named LoRA adapters, prompts, generation backends.

Importing this package is cheap; torch/transformers/peft load when a model does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agon_env.agents.protocol import Agent, Completion, SamplingParams
from agon_env.vocabulary import REFERENCE

_LAZY = {
    "LoraSpec": "agon_env.agents.adapters",
    "SharedBase": "agon_env.agents.adapters",
    "HFBackend": "agon_env.agents.hf_backend",
    "LLMAgent": "agon_env.agents.llm_agent",
    "load_base": "agon_env.agents.models",
    "ALIASES": "agon_env.agents.models",
    "ModelSourceError": "agon_env.agents.models",
    "smollm2_available": "agon_env.agents.models",
    "RolePrompts": "agon_env.agents.prompt_families",
    "render_prompt": "agon_env.agents.prompts",
    "observation_messages": "agon_env.agents.prompts",
    "ScriptedAgent": "agon_env.agents.scripted",
    "RandomAgent": "agon_env.agents.scripted",
    "VLLMBackend": "agon_env.agents.vllm_backend",
}

__all__ = [
    "ALIASES",
    "REFERENCE",
    "Agent",
    "Completion",
    "HFBackend",
    "LLMAgent",
    "LoraSpec",
    "ModelSourceError",
    "RandomAgent",
    "RolePrompts",
    "SamplingParams",
    "ScriptedAgent",
    "SharedBase",
    "VLLMBackend",
    "load_base",
    "observation_messages",
    "render_prompt",
    "smollm2_available",
]

if TYPE_CHECKING:
    from agon_env.agents.adapters import LoraSpec, SharedBase
    from agon_env.agents.hf_backend import HFBackend
    from agon_env.agents.llm_agent import LLMAgent
    from agon_env.agents.models import ALIASES, ModelSourceError, load_base, smollm2_available
    from agon_env.agents.prompt_families import RolePrompts
    from agon_env.agents.prompts import observation_messages, render_prompt
    from agon_env.agents.scripted import RandomAgent, ScriptedAgent
    from agon_env.agents.vllm_backend import VLLMBackend


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agon_env.agents' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
