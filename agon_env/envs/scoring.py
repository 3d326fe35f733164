"""One turn's verdict from a task's ``score``: right, wrong, or not judged (and why).

The env calls :func:`score_answer` on every parsed answer. One odd completion must not end a
training run, so nothing here raises; but a task that cannot judge must not train silently at
reward 0 either. Three ways a verdict is missing, each scored 0 and kept on the turn:

==========================  ==================================================================
``score`` ...               recorded as
==========================  ==================================================================
raises ``VerifierTimeout``  ``timeout=True`` (counted in ``score_timeouts``)
raises anything else        ``error`` = the traceback (counted in ``score_errors``)
returns a non-verdict       ``error`` = what it returned (``bool("no")`` is True: never cast)
==========================  ==================================================================

A verdict is a ``bool``, a numpy bool, or the integers 0 and 1.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from agon_env.envs.format import Parsed
from agon_env.envs.rewards import Outcome
from agon_env.envs.tasks.base import Problem
from agon_env.envs.tasks.errors import VerifierTimeout


@dataclass(frozen=True)
class Verdict:
    correct: bool
    error: str | None = None
    """Why ``score`` gave no verdict (a traceback, or the non-verdict it returned); else None."""
    timeout: bool = False
    """The verifier ran out of time (``error`` stays None: a timeout is its own count)."""


def as_verdict(value: Any) -> bool | None:
    """``value`` as a verdict, or None when it is not one (a str, None, 2, 0.5, ...)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    return None


def score_answer(task: Any, problem: Problem, answer: str) -> Verdict:
    """``task.score(problem, answer)`` as a :class:`Verdict`; never raises."""
    try:
        value = task.score(problem, answer)
    except VerifierTimeout:
        return Verdict(False, timeout=True)
    except Exception:
        return Verdict(False, error=traceback.format_exc())
    verdict = as_verdict(value)
    if verdict is None:
        shown = repr(value)[:200]
        return Verdict(False, error=f"score() returned {shown} ({type(value).__name__}), not a bool")
    return Verdict(verdict)


_WARNED: set[tuple[str, str]] = set()
"""``(task name, kind)`` already reported: once per task and kind per process."""


def warn_once(task_name: str, verdict: Verdict) -> None:
    """Show the first error and the first timeout of each task as a warning."""
    kind = "timeout" if verdict.timeout else "error" if verdict.error else None
    if kind is None or (task_name, kind) in _WARNED:
        return
    _WARNED.add((task_name, kind))
    if verdict.timeout:
        text = f"task {task_name!r}: score() timed out; the turn scores 0 and counts in score_timeouts."
    else:
        text = (
            f"task {task_name!r}: score() raised (or returned a non-bool); the turn scores 0. "
            f"First error:\n{verdict.error}"
        )
    gymnasium.logger.warn("%s", text)  # the text itself may hold a '%': never a format string


def judge(task: Any, problem: Problem, parsed: Parsed, length: int) -> tuple[Outcome, Verdict]:
    """One parsed completion as the env judges it: its answer scored (none: wrong, no verdict
    needed), the first error and timeout of the task warned about, and the :class:`Outcome`
    its reward is computed from. Every turn of the env and every completion
    :mod:`agon_env.integrations.trl` scores come through here."""
    verdict = score_answer(task, problem, parsed.answer) if parsed.answer else Verdict(False)
    warn_once(getattr(task, "name", type(task).__name__), verdict)
    return Outcome(correct=verdict.correct, format_ok=parsed.format_ok, length=length), verdict
