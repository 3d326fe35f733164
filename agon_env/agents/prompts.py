"""Which prompts an agent adds (a task's family) and their chat-template rendering of env observations.

The env emits ``{"text", "problem", "draft", "role", "own", "words"}`` and words the user turn itself
(``text``; see :func:`agon_env.vocabulary.challenger_text`), so what the model
reads is decided in one place. An agent adds only what is about the *model*: a system
message and worked examples for its role (:class:`RolePrompts`, worded in
:mod:`agon_env.agents.prompt_families`), then ``text`` verbatim as the last user turn.
A turn that is shown a draft (role 1 with a non-empty ``draft``) gets the challenger's
system message and examples, rendered through the same wording as ``text`` (the channel's,
which the observation names in ``words``), or, when the
draft is the player's own (``own`` is 1: self mode's second turn), the self-refinement
ones, so a self-refining model never reads of a rival; any other turn (drafting, or
reading an empty draft, as on the ``none`` channel) gets the drafter's.

Why few-shot by default: measured on SmolLM2-135M-Instruct (T=0.7, 48 new tokens,
16 problems per row), a system prompt that only *describes* the tag format produced
the tags 0/48 times; showing the format as two worked user/assistant turns before the
question produced them 46/48 times. Small models copy formats, they do not follow
format instructions. Set ``few_shot=False`` for a model that follows instructions.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from agon_env.agents.checkable_prompts import CHECKABLE_FAMILIES
from agon_env.agents.errors import PromptFamilyError
from agon_env.agents.prompt_families import CODE_FUNCTION, CODE_STDIO, MATH, RolePrompts
from agon_env.errors import unknown_id_message
from agon_env.vocabulary import CHALLENGE, WORDINGS, Words, challenger_text

__all__ = [
    "DEFAULT_FAMILY",
    "PROMPT_FAMILIES",
    "PromptFamilyError",
    "RolePrompts",
    "family_of",
    "observation_messages",
    "prompts_for",
    "register_prompt_family",
    "render_prompt",
    "render_prompts",
    "role_prompts",
]


PROMPT_FAMILIES: dict[str, RolePrompts] = {
    "arithmetic": RolePrompts(),
    "math": MATH,
    "code-function": CODE_FUNCTION,
    "code-stdio": CODE_STDIO,
    **CHECKABLE_FAMILIES,  # countdown, divides, linear: agon_env.agents.checkable_prompts
}
"""Prompts by family name; :class:`RolePrompts`'s own defaults are the arithmetic family."""

DEFAULT_FAMILY = "math"
"""The family of a task that names none (a final answer in ``<answer>``, reasoning first)."""


class ChatTemplate(Protocol):
    """A tokenizer with a chat template (a ``transformers`` tokenizer): what renders the messages."""

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        /,
        *,
        tokenize: bool,
        add_generation_prompt: bool,
        **kwargs: object,
    ) -> str: ...


class PromptSection(Protocol):
    """A run config's ``prompts`` section (:class:`agon_env.config.PromptConfig`)."""

    family: str | None
    few_shot: bool


def _system(messages: list[dict[str, str]], content: str | None) -> None:
    if content:
        messages.append({"role": "system", "content": content})


def _wording(obs: Mapping[str, object]) -> Words:
    """How the observation's channel words the challenger's turn (its ``words`` field, which the
    env reads from the channel table), so the worked examples say what the real turn says; an
    observation that names none (built by hand) is worded as the default channel."""
    name = str(obs.get("words") or challenger_text.__name__)
    if name not in WORDINGS:
        raise ValueError(f"observation field words={name!r}: not one of {sorted(WORDINGS)}")
    return WORDINGS[name]


def observation_messages(
    obs: Mapping[str, object], prompts: RolePrompts | None = None
) -> list[dict[str, str]]:
    """Chat messages for one observation: system, worked examples, then the env's ``text``."""
    p = prompts or RolePrompts()
    reading = int(obs.get("role", 0)) == CHALLENGE and bool(obs.get("draft"))
    messages: list[dict[str, str]] = []
    if reading:
        own = bool(obs.get("own", 0))
        words = _wording(obs)
        system = p.self_system if own else p.challenger_system
        examples = p.self_examples if own else p.challenger_examples
        _system(messages, system)
        if p.few_shot:
            for q, d, a in examples:
                messages.append({"role": "user", "content": words(q, d, own)})
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
    obs: Mapping[str, object],
    tokenizer: ChatTemplate,
    prompts: RolePrompts | None = None,
    template_kwargs: Mapping[str, object] | None = None,
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
    observations: Sequence[Mapping[str, object]],
    tokenizer: ChatTemplate,
    prompts: RolePrompts | None = None,
    template_kwargs: Mapping[str, object] | None = None,
) -> list[str]:
    return [render_prompt(o, tokenizer, prompts, template_kwargs) for o in observations]


def register_prompt_family(name: str, prompts: RolePrompts) -> None:
    """Add a family a task can name in ``prompt_family``; re-registering a name is an error."""
    if name in PROMPT_FAMILIES:
        raise ValueError(f"prompt family {name!r} is already registered")
    default = RolePrompts()
    if (
        prompts.self_examples == default.self_examples
        and prompts.challenger_examples != default.challenger_examples
    ):
        # Arithmetic self-refinement examples on another task would teach the wrong format.
        warnings.warn(
            f"prompt family {name!r} sets no self_examples: self mode shows its challenger examples "
            "(which speak of a rival's draft); set self_system and self_examples for self-refinement",
            stacklevel=2,
        )
        prompts = replace(prompts, self_examples=prompts.challenger_examples)
    PROMPT_FAMILIES[name] = prompts


_DEFAULTED: set[str] = set()
"""Tasks already told that they fell back to the default family (once per task per process)."""


def family_of(task: object, family: str | None = None) -> str:
    """``family`` if given, else the task's own ``prompt_family``, else :data:`DEFAULT_FAMILY`
    (said once per task: a code task would otherwise be prompted with math examples unawares)."""
    name = family or getattr(task, "prompt_family", None)
    if name is None:
        task_name = str(getattr(task, "name", type(task).__name__))
        if task_name not in _DEFAULTED:
            _DEFAULTED.add(task_name)
            warnings.warn(
                f"task {task_name!r} names no prompt_family: agents use the {DEFAULT_FAMILY!r} family's "
                f"worked examples (set prompt_family on the task, one of {sorted(PROMPT_FAMILIES)}, "
                "or --prompts.family)",
                stacklevel=2,
            )
        name = DEFAULT_FAMILY
    if name not in PROMPT_FAMILIES:
        raise PromptFamilyError(unknown_id_message("prompt family", name, sorted(PROMPT_FAMILIES)))
    return name


def prompts_for(task: object, family: str | None = None, few_shot: bool = True) -> RolePrompts:
    """The :class:`RolePrompts` an agent uses on ``task`` (see :func:`family_of`)."""
    return replace(PROMPT_FAMILIES[family_of(task, family)], few_shot=few_shot)


def role_prompts(task: object, section: PromptSection) -> RolePrompts:
    """The prompts of a run on ``task`` as its config's ``prompts`` section sets them (its
    ``family`` and ``few_shot``: :class:`agon_env.config.PromptConfig`). ``agon train``'s agents,
    its held-out check and ``agon eval`` all ask here, so they read the same prompts."""
    try:
        return prompts_for(task, section.family, section.few_shot)
    except PromptFamilyError as exc:
        raise PromptFamilyError(f"prompts.family: {exc}") from None
