"""Reward schemes: pure functions from (correctness, format, length) to rewards.

With ``c`` correctness (0/1), ``φ`` format (0/1) and ``λ`` the format weight (0.5):

==============  ===========================  ==========================================
scheme          drafter ``R(a)``             challenger ``R(b)``
==============  ===========================  ==========================================
``conversion``  ``2c(a) + λφ(a)``            ``2c(b) + c(b)(1−c(a)) + λφ(b)``  (paper)
``coop``        ``2c(a) + λφ(a)``            ``2c(b) + λφ(b)``
``margin``      ``2c(a) + λφ(a)``            ``3c(b) − c(a) + λφ(b)``
==============  ===========================  ==========================================

The drafter always trains with plain GRPO rewards; only the challenger's term changes,
so a scheme is one function of ``(c_a, c_b)``.

The optional length tiebreak ``γ``: a turn is *eligible* when both the draft and the
challenge are correct and its trace is strictly shorter than the other's (tokens when
the agent reported them, else characters; nothing on an exact tie or when either is
wrong). By default only the challenger can earn it, so the drafter's reward stays free
of rival terms (plain GRPO, as in the paper's drafter stream); ``tiebreak_drafter=True``
lets an eligible drafter earn it too. Add a scheme with
:func:`register_scheme`; the env looks schemes up by name, so no caller branches on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agon_env.options import EnvOptions

FORMAT_WEIGHT: float = EnvOptions.lam
"""λ, the paper's format weight: the default of every reward below and of the env's ``lam``
(defined once, as that keyword's default)."""
PAPER_SCHEME: str = EnvOptions.reward_scheme
"""The paper's challenger reward: the default scheme of the functions below and of the env."""

ChallengerTerm = Callable[[int, int], float]
"""``(c_a, c_b) -> correctness part of R(b)`` (the format term is added separately)."""

_SCHEMES: dict[str, ChallengerTerm] = {}


def register_scheme(name: str, term: ChallengerTerm) -> None:
    if name in _SCHEMES:
        raise ValueError(f"reward scheme {name!r} is already registered")
    _SCHEMES[name] = term


def scheme_names() -> list[str]:
    return sorted(_SCHEMES)


def get_scheme(name: str) -> ChallengerTerm:
    try:
        return _SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown reward_scheme {name!r}; choose one of {scheme_names()}") from None


register_scheme("conversion", lambda ca, cb: 2 * cb + cb * (1 - ca))
register_scheme("coop", lambda ca, cb: 2 * cb)
register_scheme("margin", lambda ca, cb: 3 * cb - ca)


@dataclass(frozen=True)
class Outcome:
    """What the env measured of one completion."""

    correct: bool
    format_ok: bool
    length: int
    """Trace length used by the tiebreak (tokens when known, else characters)."""


def drafter_reward(a: Outcome, lam: float = FORMAT_WEIGHT) -> float:
    """``R(a) = 2c(a) + λφ(a)``: plain GRPO reward, also used in solo mode."""
    return 2.0 * int(a.correct) + lam * int(a.format_ok)


def challenger_reward(
    a: Outcome, b: Outcome, scheme: str = PAPER_SCHEME, lam: float = FORMAT_WEIGHT
) -> float:
    """``R(b)`` under ``scheme``, where ``a`` is b's own paired draft."""
    return float(get_scheme(scheme)(int(a.correct), int(b.correct))) + lam * int(b.format_ok)


def length_tiebreak(a: Outcome, b: Outcome, gamma: float) -> tuple[float, float]:
    """Bonuses ``(to a, to b)``: ``γ`` to the shorter trace when both are correct."""
    if not (a.correct and b.correct) or a.length == b.length or gamma == 0:
        return 0.0, 0.0
    return (gamma, 0.0) if a.length < b.length else (0.0, gamma)


def episode_rewards(
    a: Outcome,
    b: Outcome,
    scheme: str = PAPER_SCHEME,
    lam: float = FORMAT_WEIGHT,
    gamma: float | None = None,
    tiebreak_drafter: bool = False,
) -> tuple[float, float]:
    """``(R(a), R(b))`` for one drafter/challenger pair, tiebreak included when ``gamma`` is set."""
    ra, rb = drafter_reward(a, lam), challenger_reward(a, b, scheme, lam)
    if gamma:
        ba, bb = length_tiebreak(a, b, gamma)
        ra, rb = ra + (ba if tiebreak_drafter else 0.0), rb + bb
    return ra, rb
