"""The game's words, defined once: seats, roles and the reference policy.

Every module that names a seat, a role or the adapter-disabled base imports it from
here, so renaming a seat or adding a role is one edit.

* A **seat** is a player of the PettingZoo env (``possible_agents``). In training each
  seat is played by the LoRA adapter of the same name.
* A **role** is what a seat does in one episode: it drafts (reads the bare problem) or
  challenges (reads the draft's summary). Seats swap roles between steps; roles index
  the observation's ``role`` field (0 drafts, 1 challenges).
* The **reference** policy is the frozen base with every adapter disabled (the KL
  anchor of the GRPO loss, and the untrained baseline of ``agon eval``).
"""

from __future__ import annotations

from typing import Final

AGENT_A: Final = "agent_a"
AGENT_B: Final = "agent_b"
SEATS: Final = (AGENT_A, AGENT_B)
"""The env's two seats, in ``possible_agents`` order."""

DRAFTER: Final = "drafter"
CHALLENGER: Final = "challenger"
ROLES: Final = (DRAFTER, CHALLENGER)
"""Role names; ``ROLES[i]`` is the role whose observations carry ``role == i``."""

REFERENCE: Final = "__base__"
"""Adapter name of the reference policy: the shared base with adapters disabled."""


def other_seat(seat: str) -> str:
    """The rival of ``seat``."""
    return SEATS[1 - SEATS.index(seat)]
