"""The game's words, defined once: seats, roles, the reference policy, the challenger's user
turns (text and latent), the latent draft handle and the role indices.

Every module that names a seat, a role or the adapter-disabled base imports it from
here, so renaming a seat or adding a role is one edit. Both layers that speak the game
import it -- the env (``envs``) and the agents, which know no env -- so nothing here
imports either.

* A **seat** is a player of the PettingZoo env (``possible_agents``). In training each
  seat is played by the LoRA adapter of the same name.
* A **role** is what a seat does in one episode: it drafts (reads the bare problem) or
  challenges (reads the draft's summary). Seats swap roles between steps; roles index
  the observation's ``role`` field (0 drafts, 1 challenges).
* The **reference** policy is the frozen base with every adapter disabled (the KL
  anchor of the GRPO loss, and the untrained baseline of ``agon eval``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

AGENT_A: Final = "agent_a"
AGENT_B: Final = "agent_b"
SEATS: Final = (AGENT_A, AGENT_B)
"""The env's two seats, in ``possible_agents`` order."""

DRAFTER: Final = "drafter"
CHALLENGER: Final = "challenger"
ROLES: Final = (DRAFTER, CHALLENGER)
"""Role names; ``ROLES[i]`` is the role whose observations carry ``role == i``."""
DRAFT: Final = 0
CHALLENGE: Final = 1
"""Stages of an episode, and the observation's ``role`` field (``ROLES[i]`` names them)."""

REFERENCE: Final = "__base__"
"""Adapter name of the reference policy: the shared base with adapters disabled."""
BASE: Final = "base"
"""Policy name of the untrained base (the reference policy) in an evaluation and in a resolved
run's per-policy sampling."""


def other_seat(seat: str) -> str:
    """The rival of ``seat``."""
    return SEATS[1 - SEATS.index(seat)]


HANDLE_PREFIX: Final = "latent:"
"""How a latent observation's ``draft`` starts: it names a draft, it is no text of it."""
LATENT_TOKENS: Final = "latent_tokens"
"""The key of a latent challenger completion's ``meta`` holding how many draft tokens of cache it
read (0: the draft had no span, so nothing: the latent ``draft_unusable``)."""
_CHECK_IT = "Do not trust or paraphrase the draft: verify it and re-derive the answer."


def _whose(own: bool) -> str:
    return "Your own earlier draft" if own else "A rival's draft"


def challenger_text(problem: str, draft: str, own: bool = False) -> str:
    """The challenger's user turn in a text channel: the problem, the shown draft and the instruction.

    The env puts it in the observation's ``text`` and an agent renders its worked examples
    through it, so this is the one place the challenger's prompt is worded. ``own`` words it
    for self-refinement, where the draft is the player's own. The answer block is removed,
    but the summary may still state the result: the prompt says only what is true.
    """
    return _shown_turn(problem, draft, own, "summarised")


def trace_text(problem: str, draft: str, own: bool = False) -> str:
    """The challenger's user turn in the ``trace`` channel, which shows the whole completion:
    worded as what it is, not as a summary."""
    return _shown_turn(problem, draft, own, "in full, reasoning and summary")


def _shown_turn(problem: str, draft: str, own: bool, how: str) -> str:
    return f"{problem}\n\n{_whose(own)}, {how} (its answer block is removed):\n{draft}\n\n{_CHECK_IT}"


def latent_text(problem: str, draft: str, own: bool = False) -> str:
    """The challenger's user turn in the latent channel: no draft text, and no handle either
    (a digest means nothing to the model); the draft is in its context as a KV cache."""
    return (
        f"{problem}\n\n{_whose(own)} precedes this conversation in your context, without its answer "
        f"block.\n\n{_CHECK_IT}"
    )


Words = Callable[[str, str, bool], str]
"""``(problem, shown draft, own) -> the challenger's user turn``: one wording of it."""
WORDINGS: Final[dict[str, Words]] = {w.__name__: w for w in (challenger_text, trace_text, latent_text)}
"""The challenger's user turns by name. A channel picks one (``Channel.words`` in
:data:`agon_env.envs.exchange.CHANNELS`) and its observations name it in their ``words`` field,
so an agent, which imports no env, words its worked examples as the env words the real turn."""


def draft_handle(problem: str, draft: str) -> str:
    """The opaque name of a draft (the latent channel's ``draft``): a digest of the problem and
    the completion text the env received. The agent that wrote the draft computes the same
    name from its observation's ``problem`` and its completion's ``text``, so no model state
    passes through the env, and the agents resolve it without importing the env."""
    digest = hashlib.sha256(f"{problem}\x00{draft}".encode()).hexdigest()[:24]
    return f"{HANDLE_PREFIX}{digest}"


def is_handle(draft: object) -> bool:
    """Whether an observation's ``draft`` is a latent handle rather than text to read."""
    return isinstance(draft, str) and draft.startswith(HANDLE_PREFIX)


VLLM_REFUSAL = (
    "exchange = 'latent' needs the HF backend (--model.backend hf): vLLM cannot take an injected "
    "KV cache (docs/agents.md, 'Latent exchange')"
)
"""The one line that refuses ``--exchange latent`` with vLLM: the latent channel's row says it
(:data:`agon_env.envs.exchange.CHANNELS`, read by config validation) and
:class:`agon_env.agents.latent.LatentAgent` raises it."""
