"""Role prompts and chat-template rendering of env observations.

The env emits ``{"text", "problem", "draft", "role"}`` and words the user turn itself
(``text``; see :func:`agon_env.envs.exchange.challenger_text`), so what the model
reads is decided in one place. An agent adds only what is about the *model*: a system
message and worked examples for its role, then ``text`` verbatim as the last user turn.
A turn that is shown a draft (role 1 with a non-empty ``draft``) gets the challenger's
system message and examples, rendered through the same ``challenger_text``; any other
turn (drafting, or challenging in hidden mode) gets the drafter's.

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
from agon_env.envs.exchange import challenger_text

DRAFTER_SYSTEM = (
    "You are a careful problem solver. Reason step by step, then write a one-line "
    "<summary>...</summary> of your reasoning and the final result in <answer>...</answer>."
)
CHALLENGER_SYSTEM = (
    "You are a careful verifier. You are shown a problem and a rival's draft summary. "
    "Do not trust or paraphrase the draft: verify it and re-derive the result yourself. "
    "Then write a one-line <summary>...</summary> and the final result in <answer>...</answer>."
)

# Worked turns: (user, assistant). Short arithmetic, matching how agon/arith-v0 asks.
DRAFTER_EXAMPLES: tuple[tuple[str, str], ...] = (
    (
        "What is 3 + 4?",
        "3 + 4 = 7.\n<summary>Adding 3 and 4 gives 7.</summary>\n<answer>7</answer>",
    ),
    (
        "What is 6 * 7?",
        "6 * 7 = 42.\n<summary>Six sevens are 42.</summary>\n<answer>42</answer>",
    ),
)
# One wrong draft, one right one: the challenger must learn to check, not to contradict.
CHALLENGER_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "What is 5 + 8?",
        "5 + 8 = 12.",
        "Check: 5 + 8 = 13, not 12. The draft is wrong.\n"
        "<summary>Re-derived 5 + 8 = 13; the draft's 12 is off by one.</summary>\n<answer>13</answer>",
    ),
    (
        "What is 9 - 4?",
        "9 - 4 = 5.",
        "Check: 9 - 4 = 5. The draft is right.\n"
        "<summary>Re-derived 9 - 4 = 5, agreeing with the draft.</summary>\n<answer>5</answer>",
    ),
)


@dataclass
class RolePrompts:
    """How an agent turns an observation into chat messages."""

    drafter_system: str | None = DRAFTER_SYSTEM
    """System message for role 0; ``None`` leaves the model's default system prompt."""
    challenger_system: str | None = CHALLENGER_SYSTEM
    """System message for role 1 when a draft is shown."""
    few_shot: bool = True
    """Prepend the worked examples as user/assistant turns (needed for small models)."""
    drafter_examples: Sequence[tuple[str, str]] = field(default_factory=lambda: DRAFTER_EXAMPLES)
    """``(question, completion)`` pairs shown before a drafting question."""
    challenger_examples: Sequence[tuple[str, str, str]] = field(default_factory=lambda: CHALLENGER_EXAMPLES)
    """``(question, draft summary, completion)`` triples shown before a challenge."""


def _system(messages: list[dict[str, str]], content: str | None) -> None:
    if content:
        messages.append({"role": "system", "content": content})


def observation_messages(obs: Mapping[str, Any], prompts: RolePrompts | None = None) -> list[dict[str, str]]:
    """Chat messages for one observation: system, worked examples, then the env's ``text``."""
    p = prompts or RolePrompts()
    challenging = int(obs.get("role", 0)) == CHALLENGE and bool(obs.get("draft"))
    messages: list[dict[str, str]] = []
    if challenging:
        _system(messages, p.challenger_system)
        if p.few_shot:
            for q, d, a in p.challenger_examples:
                messages.append({"role": "user", "content": challenger_text(q, d)})
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
