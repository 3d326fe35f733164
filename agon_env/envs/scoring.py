"""One turn's verdict from a task's ``score``: right, wrong, or not judged (and why).

The env calls :func:`score_answer` on every parsed answer. One odd completion must not end a
training run, so nothing here raises; but a task that cannot judge must not train silently at
reward 0 either. Three ways a verdict is missing, each scored 0 and kept on the turn:

================================  ==================================================================
``score`` ...                     recorded as
================================  ==================================================================
raises ``VerifierTimeout``        ``timeout=True`` (counted in ``score_timeouts``)
does not return in time           ``timeout=True`` (counted in ``score_timeouts``): see below
raises anything else              ``error`` = the traceback (counted in ``score_errors``)
returns a non-verdict             ``error`` = what it returned (``bool("no")`` is True: never cast)
================================  ==================================================================

A verdict is a ``bool``, a numpy bool, or the integers 0 and 1.

**The wall-clock limit.** A ``score`` that never returns would hang ``env.step`` and with it
training, evaluation and ``check_env``. So every call runs in a worker thread and the caller
waits at most ``task.score_timeout`` seconds (:data:`SCORE_TIMEOUT_S` when the task sets none;
above the built-in verifiers' own bounds, so they time out first and say why). A call that
overruns is a timeout and the step returns. A thread rather than a process, because a task
is any Python object (a closure, a sandbox pool, an open file): it need not pickle, and a call
costs a thread start, not a process start. What this does *not* cover:

* a thread cannot be killed: the overrunning call is abandoned, not stopped. Its daemon
  thread runs on (and holds whatever CPU, memory or locks it took) until it returns or the
  process exits; a later call that waits on a lock it holds overruns too, so each costs the
  full limit. A verifier that can hang should bound itself, as math-verify's child process
  and the code sandbox do.
* code that holds the GIL without releasing it (a C extension in a tight loop) stops every
  thread, the waiting one too: no limit inside the process can help there.
* a scorer that needs the main thread (``signal.alarm`` for its own timeout) cannot run in a
  worker: set ``score_timeout = None`` on the task to call it in the caller's thread, unlimited.
"""

from __future__ import annotations

import threading
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
    hung: bool = False
    """The timeout was the env's wall-clock limit (``score`` did not return), not the verifier's own."""


def as_verdict(value: Any) -> bool | None:
    """``value`` as a verdict, or None when it is not one (a str, None, 2, 0.5, ...)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    return None


SCORE_TIMEOUT_S = 120.0
"""How long one ``score`` call may run when its task sets no ``score_timeout`` (seconds): above
every built-in verifier's own bound (math-verify 5 s, a code sandbox run 15 s, a CodeContests
answer 60 s in all), so those report their own timeouts first."""


def score_limit(task: Any) -> float | None:
    """The seconds ``task.score`` may run: its ``score_timeout`` (None: no limit), else
    :data:`SCORE_TIMEOUT_S`."""
    limit = getattr(task, "score_timeout", SCORE_TIMEOUT_S)
    if limit is not None and not (isinstance(limit, (int, float)) and limit > 0):
        raise ValueError(
            f"task {getattr(task, 'name', type(task).__name__)!r}: score_timeout = {limit!r}; "
            "use seconds > 0, or None for no limit"
        )
    return None if limit is None else float(limit)


def score_answer(task: Any, problem: Problem, answer: str) -> Verdict:
    """``task.score(problem, answer)`` as a :class:`Verdict`, within the task's wall-clock limit
    (:func:`score_limit`, the module docstring); never raises, never hangs but as said there."""
    limit = score_limit(task)
    if limit is None:
        return _judge(task, problem, answer)
    box: list[Verdict] = []
    worker = threading.Thread(
        target=lambda: box.append(_judge(task, problem, answer)), daemon=True, name="agon-score"
    )
    worker.start()
    worker.join(limit)
    if not box:  # abandoned: a thread cannot be stopped (the module docstring)
        return Verdict(False, timeout=True, hung=True)
    return box[0]


def _judge(task: Any, problem: Problem, answer: str) -> Verdict:
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
    kind = "hung" if verdict.hung else "timeout" if verdict.timeout else "error" if verdict.error else None
    if kind is None or (task_name, kind) in _WARNED:
        return
    _WARNED.add((task_name, kind))
    if verdict.hung:
        text = (
            f"task {task_name!r}: score() did not return within its wall-clock limit (the task's "
            f"score_timeout, default {SCORE_TIMEOUT_S:g} s); the call is abandoned in a background "
            "thread, the turn scores 0 and counts in score_timeouts."
        )
    elif verdict.timeout:
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
