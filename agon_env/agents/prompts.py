"""Role prompts and chat-template rendering of env observations.

The env emits ``{"text", "problem", "draft", "role", "own"}`` and words the user turn itself
(``text``; see :func:`agon_env.envs.exchange.challenger_text`), so what the model
reads is decided in one place. An agent adds only what is about the *model*: a system
message and worked examples for its role, then ``text`` verbatim as the last user turn.
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
from dataclasses import dataclass, field
from typing import Any

from agon_env.envs.draft_challenge import CHALLENGE
from agon_env.envs.exchange import challenger_text, is_handle, latent_text

METHOD_SUMMARY = "write a short <summary>...</summary> of your method (not its result) and"
"""The summary is what the other turn reads, so every family asks for the method only: a
summary that states the result hands it over instead of something to check."""

DRAFTER_SYSTEM = (
    f"You are a careful problem solver. Reason step by step, then {METHOD_SUMMARY} "
    "the final result in <answer>...</answer>."
)
CHALLENGER_SYSTEM = (
    "You are a careful verifier. You are shown a problem and a rival's draft summary. "
    "Do not trust or paraphrase the draft: check its method and re-derive the result yourself. "
    f"Then {METHOD_SUMMARY} the final result in <answer>...</answer>."
)
SELF_SYSTEM = (
    "You are a careful problem solver checking your own work. You are shown a problem and the "
    "summary of your own earlier draft. Do not trust or paraphrase it: check its method and "
    f"re-derive the result yourself. Then {METHOD_SUMMARY} the final result in <answer>...</answer>."
)

# Worked turns: (user, assistant). Short arithmetic, matching how agon/arith-v0 asks. The
# summaries name the method and never the result (the reasoning line may state it).
DRAFTER_EXAMPLES: tuple[tuple[str, str], ...] = (
    (
        "What is 3 + 4?",
        "3 + 4 = 7.\n<summary>Added 4 to 3.</summary>\n<answer>7</answer>",
    ),
    (
        "What is 6 * 7?",
        "6 * 7 = 42.\n<summary>Multiplied 6 by 7.</summary>\n<answer>42</answer>",
    ),
)
# One wrong draft, one right one: the challenger must learn to check, not to contradict. The
# shown drafts are summaries as a drafter taught by the examples above writes them.
CHALLENGER_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "What is 5 + 8?",
        "Multiplied 5 by 8.",
        "Check: the question adds 5 and 8, it does not multiply them; 5 + 8 = 13. The draft is wrong.\n"
        "<summary>Added 8 to 5 instead of multiplying.</summary>\n<answer>13</answer>",
    ),
    (
        "What is 9 - 4?",
        "Subtracted 4 from 9.",
        "Check: 9 - 4 = 5, and subtracting 4 from 9 is what the question asks. The draft is right.\n"
        "<summary>Subtracted 4 from 9, as the draft did.</summary>\n<answer>5</answer>",
    ),
)
# Self-refinement reads the player's own draft: the same check, worded as one's own.
SELF_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "What is 7 + 6?",
        "Multiplied 7 by 6.",
        "Check: the question adds 7 and 6, but my draft multiplied them; 7 + 6 = 13. My draft was wrong.\n"
        "<summary>Added 6 to 7 instead of multiplying.</summary>\n<answer>13</answer>",
    ),
    (
        "What is 8 * 3?",
        "Multiplied 8 by 3.",
        "Check: 8 * 3 = 24, and multiplying 8 by 3 is what the question asks. My draft was right.\n"
        "<summary>Multiplied 8 by 3, as my draft did.</summary>\n<answer>24</answer>",
    ),
)


@dataclass
class RolePrompts:
    """How an agent turns an observation into chat messages."""

    drafter_system: str | None = DRAFTER_SYSTEM
    """System message for role 0; ``None`` leaves the model's default system prompt."""
    challenger_system: str | None = CHALLENGER_SYSTEM
    """System message for role 1 when a rival's draft is shown."""
    few_shot: bool = True
    """Prepend the worked examples as user/assistant turns (needed for small models)."""
    drafter_examples: Sequence[tuple[str, str]] = field(default_factory=lambda: DRAFTER_EXAMPLES)
    """``(question, completion)`` pairs shown before a drafting question."""
    challenger_examples: Sequence[tuple[str, str, str]] = field(default_factory=lambda: CHALLENGER_EXAMPLES)
    """``(question, draft summary, completion)`` triples shown before a challenge."""
    self_system: str | None = SELF_SYSTEM
    """System message for role 1 when the draft shown is the player's own (``obs["own"]``)."""
    self_examples: Sequence[tuple[str, str, str]] = field(default_factory=lambda: SELF_EXAMPLES)
    """``(question, own draft summary, completion)`` triples shown before a self-refinement."""


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
        # A latent turn's examples are worded as it is: no draft text (the draft is a KV cache).
        words = latent_text if is_handle(obs.get("draft")) else challenger_text
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
