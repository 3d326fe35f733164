"""Role prompts and chat-template rendering of env observations.

The env emits ``{"text", "problem", "draft", "role"}``; an agent renders that into the
chat its model was tuned on. Role 0 drafts: reason, then ``<summary>`` and ``<answer>``.
Role 1 challenges: it reads the problem plus the rival's summary and is told not to
trust or paraphrase it but to verify and re-derive.

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
CHALLENGE_TEMPLATE = (
    "{problem}\n\nA rival's draft, summarised (its final answer is hidden):\n{draft}\n\n"
    "Do not trust or paraphrase the draft: verify it and re-derive the answer."
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
    challenge_template: str = CHALLENGE_TEMPLATE
    """User turn for a challenge; fields ``{problem}`` and ``{draft}``."""
    use_env_text: bool = False
    """Send the env's ``text`` field verbatim as the user turn instead of the templates."""


def _system(messages: list[dict[str, str]], content: str | None) -> None:
    if content:
        messages.append({"role": "system", "content": content})


def observation_messages(obs: Mapping[str, Any], prompts: RolePrompts | None = None) -> list[dict[str, str]]:
    """Chat messages for one observation.

    A role-1 observation with an empty ``draft`` (hidden mode: the challenger sees only
    the problem) is rendered as a drafting turn, since there is nothing to verify.
    """
    p = prompts or RolePrompts()
    problem = obs.get("problem") or obs.get("text", "")
    draft = obs.get("draft") or ""
    challenging = int(obs.get("role", 0)) == 1 and bool(draft)
    messages: list[dict[str, str]] = []
    if challenging:
        _system(messages, p.challenger_system)
        if p.few_shot:
            for q, d, a in p.challenger_examples:
                messages.append({"role": "user", "content": p.challenge_template.format(problem=q, draft=d)})
                messages.append({"role": "assistant", "content": a})
        user = p.challenge_template.format(problem=problem, draft=draft)
    else:
        _system(messages, p.drafter_system)
        if p.few_shot:
            for q, a in p.drafter_examples:
                messages.append({"role": "user", "content": q})
                messages.append({"role": "assistant", "content": a})
        user = problem
    if p.use_env_text and obs.get("text"):
        user = str(obs["text"])
    messages.append({"role": "user", "content": user})
    return messages


def render_prompt(obs: Mapping[str, Any], tokenizer: Any, prompts: RolePrompts | None = None) -> str:
    """The observation as prompt text, ending with the assistant generation header."""
    return tokenizer.apply_chat_template(
        observation_messages(obs, prompts), tokenize=False, add_generation_prompt=True
    )


def render_prompts(
    observations: Sequence[Mapping[str, Any]], tokenizer: Any, prompts: RolePrompts | None = None
) -> list[str]:
    return [render_prompt(o, tokenizer, prompts) for o in observations]
