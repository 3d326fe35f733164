"""Why a verifier gave no verdict: raised by a task's ``score`` instead of returning False.

A wrong answer is ``False``. A verifier that could not judge (math-verify crashed or is not
installed, the code sandbox could not start, a worker pool died) raises :class:`VerifierError`;
one that ran out of time raises :class:`VerifierTimeout`. The env
(:mod:`agon_env.envs.scoring`) scores both 0 but records them apart from wrong answers, so a
broken verifier shows up in ``score_errors`` / ``score_timeouts`` instead of as a weak policy.
"""

from __future__ import annotations

from agon_env.errors import UserError


class VerifierError(RuntimeError):
    """The verifier failed on its own account; the message says how (a traceback, stderr)."""


class VerifierTimeout(VerifierError):
    """The verifier did not answer within its time budget (a subclass: catching
    :class:`VerifierError` catches both)."""


class DataUnavailableError(UserError, FileNotFoundError):
    """The data is neither on this machine nor reachable on the hub (one line says what to set)."""


class EnvOptionError(UserError, ValueError):
    """An env keyword of the wrong type or out of range (:func:`option_problems`)."""
