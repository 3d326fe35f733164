"""Algorithm plugins: what each training recipe declares, and a registry to find them.

An algorithm is data, not code paths: the env mode, reward scheme and (if it fixes one)
exchange channel it asks the env for, how many adapters it trains, who drafts at step ``t``
(a role schedule), and which role's stream is trained. The trainer reads these fields and
never branches on a name, so a new recipe is one :class:`AlgorithmPlugin` passed to
:func:`register_algorithm` (the built-ins are the rows of
:mod:`agon_env.algorithms.plugins`, which the package's ``__init__`` imports, so they are
registered before anyone can ask this module; it does not import them itself, which would
make the two modules import each other).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from agon_env.envs.rewards import PAPER_SCHEME
from agon_env.errors import InputError, unknown_id_message
from agon_env.vocabulary import AGENT_A, CHALLENGER, DRAFTER, ROLES, SEATS, other_seat


def _alternate(step: int) -> str:
    # The paper swaps roles every step so neither adapter only ever drafts or challenges.
    return SEATS[step % 2]


def _fixed(step: int) -> str:
    return AGENT_A


ROLE_SCHEDULES: dict[str, Callable[[int], str]] = {"alternate": _alternate, "fixed": _fixed}
"""Role schedules by name: step -> the seat that drafts at that step."""


@dataclass(frozen=True)
class AlgorithmPlugin:
    name: str
    summary: str
    """One line for ``agon train --help`` and the docs."""
    env_mode: str
    """``challenge``, ``solo`` or ``self`` (see the env's modes)."""
    reward_scheme: str = PAPER_SCHEME
    """``conversion``, ``coop`` or ``margin`` (the challenger's reward; drafters always get 2c + λφ)."""
    adapters: tuple[str, ...] = SEATS
    """Adapter names; one adapter means a single seat plays every role."""
    role_schedule: str = "alternate"
    """Key of :data:`ROLE_SCHEDULES`."""
    trained_roles: tuple[str, ...] = ROLES
    """Streams that produce updates; each updates the adapter of the seat that played that role."""
    exchange: str | None = None
    """The channel the challenger reads the draft through in training, when the recipe fixes one
    (hidden-draft: ``none``); ``None``: the run's ``env.exchange``."""
    first_drafter: str = AGENT_A
    """The seat the schedule's ``agent_a`` turns go to: ``agent_b`` mirrors the schedule (b drafts
    at step 0 and wherever a would have), so a gap between the adapters can be traced to the
    seat or to its place in the schedule (docs/benchmarks.md, "Why agent_b trails agent_a")."""

    def __post_init__(self) -> None:
        if self.role_schedule not in ROLE_SCHEDULES:
            known = sorted(ROLE_SCHEDULES)
            raise ValueError(f"role_schedule must be one of {known}; got {self.role_schedule!r}")
        if not 1 <= len(self.adapters) <= 2 or not set(self.adapters) <= set(SEATS):
            raise ValueError(f"adapters must be one or two of {SEATS}, got {self.adapters}")
        if not self.trained_roles or not set(self.trained_roles) <= set(ROLES):
            raise ValueError(f"trained_roles must be a non-empty subset of {ROLES}, got {self.trained_roles}")
        if self.first_drafter not in self.adapters:
            raise ValueError(f"first_drafter must be one of {self.adapters}, got {self.first_drafter!r}")

    def mirrored(self, first_drafter: str) -> AlgorithmPlugin:
        """This plugin with its role schedule given to ``first_drafter`` first."""
        return replace(self, first_drafter=first_drafter)

    def drafter(self, step: int) -> str:
        """The seat that drafts at ``step`` (a single-adapter algo always uses its seat)."""
        seat = ROLE_SCHEDULES[self.role_schedule](step)
        seat = seat if self.first_drafter == AGENT_A else other_seat(seat)
        return seat if seat in self.adapters else self.adapters[0]

    def seats(self, step: int) -> dict[str, str]:
        """``{role: seat}`` at ``step``; with one adapter the same seat plays both roles."""
        d = self.drafter(step)
        other = next((s for s in self.adapters if s != d), d)
        return {DRAFTER: d, CHALLENGER: other}

    def updates(self, step: int) -> dict[str, str]:
        """``{role: adapter}`` for every trained stream at ``step``."""
        seats = self.seats(step)
        return {role: seats[role] for role in self.trained_roles}


_ALGORITHMS: dict[str, AlgorithmPlugin] = {}


def register_algorithm(plugin: AlgorithmPlugin) -> AlgorithmPlugin:
    """Add ``plugin`` under its own name; re-registering a name is an error."""
    if plugin.name in _ALGORITHMS:
        raise ValueError(f"algorithm {plugin.name!r} is already registered")
    _ALGORITHMS[plugin.name] = plugin
    return plugin


def algorithm_names() -> list[str]:
    return sorted(_ALGORITHMS)


def get_algorithm(name: str) -> AlgorithmPlugin:
    try:
        return _ALGORITHMS[name]
    except KeyError:
        raise InputError(unknown_id_message("algorithm", name, sorted(_ALGORITHMS))) from None
