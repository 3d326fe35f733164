"""Chat-template rendering of env observations with a family's role prompts.

The env emits ``{"text", "problem", "draft", "role", "own"}`` and words the user turn itself
(``text``; see :func:`agon_env.vocabulary.challenger_text`), so what the model
reads is decided in one place. An agent adds only what is about the *model*: a system
message and worked examples for its role (:class:`RolePrompts`, worded in
:mod:`agon_env.agents.prompt_families`), then ``text`` verbatim as the last user turn.
A turn that is shown a draft (role 1 with a non-empty ``draft``) gets the challenger's
system message and examples, rendered through the same ``challenger_text``, or, when the
draft is the player's own (``own`` is 1: self mode's second turn), the self-refinement
ones, so a self-refining model never reads of a rival; any other turn (drafting, or
challenging in hidden mode) gets the drafter's.

Why few-shot by default: measured on SmolLM2-135M-Instruct (T=0.7, 48 new tokens,
16 problems per row), a system prompt that only *describes* the tag format produced
the tags 0/48 times; showing the format as two worked user/assistant turns before the
question produced them 46/48 times. Small models copy formats, they do not follow
format instructions. Set ``few_shot=False`` for a model that follows instructions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agon_env.agents.prompt_families import RolePrompts
from agon_env.vocabulary import CHALLENGE, challenger_text

__all__ = ["RolePrompts", "observation_messages", "render_prompt", "render_prompts"]


def _system(messages: list[dict[str, str]], content: str | None) -> None:
    if content:
        messages.append({"role": "system", "content": content})


def observation_messages(obs: Mapping[str, Any], prompts: RolePrompts | None = None) -> list[dict[str, str]]:
    """Chat messages for one observation: system, worked examples, then the env's ``text``."""
    p = prompts or RolePrompts()
    reading = int(obs.get("role", 0)) == CHALLENGE and bool(obs.get("draft"))
    messages: list[dict[str, str]] = []
    if reading:
        own = bool(obs.get("own", 0))
        system = p.self_system if own else p.challenger_system
        examples = p.self_examples if own else p.challenger_examples
        _system(messages, system)
        if p.few_shot:
            for q, d, a in examples:
                messages.append({"role": "user", "content": challenger_text(q, d, own=own)})
                messages.append({"role": "assistant", "content": a})
    else:
        _system(messages, p.drafter_system)
        if p.few_shot:
            for q, a in p.drafter_examples:
                messages.append({"role": "user", "content": q})
                messages.append({"role": "assistant", "content": a})
    messages.append({"role": "user", "content": str(obs.get("text") or obs.get("problem", ""))})
    return messages


def render_prompt(
    obs: Mapping[str, Any],
    tokenizer: Any,
    prompts: RolePrompts | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The observation as prompt text, ending with the assistant generation header.

    ``template_kwargs`` go to the chat template (``enable_thinking=True`` for Qwen3).
    """
    return tokenizer.apply_chat_template(
        observation_messages(obs, prompts),
        tokenize=False,
        add_generation_prompt=True,
        **(template_kwargs or {}),
    )


def render_prompts(
    observations: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    prompts: RolePrompts | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> list[str]:
    return [render_prompt(o, tokenizer, prompts, template_kwargs) for o in observations]
