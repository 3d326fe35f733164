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

**A batch of answers.** One hung call costs its whole limit, so calls one after another would
cost a step of 16 answers 16 limits (32 minutes at the default). :func:`step_concurrently`
steps a batch of envs (one stage of :func:`agon_env.episodes.play_episodes`) on up to
:func:`score_workers` threads -- the CPUs this process may use, so CPU-bound verifiers do not
outrun the machine and time out on each other -- and a :func:`batch` scope ends the waiting:
once every call of the batch so far has hung, :func:`score_workers` of them (a whole first
wave), the rest are not started and count as hung. A step whose scorer hangs for good thus
costs about one limit, and :mod:`agon_env.algorithms.rollout` then stops the run. Calls that
share one verifier process (math-verify's, under a lock) wait for it inside their limit.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import gymnasium
import numpy as np

from agon_env.envs.format import Parsed
from agon_env.envs.rewards import Outcome
from agon_env.envs.tasks.base import Problem, Task
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
    skipped: bool = False
    """Not called at all: every earlier call of its batch had hung (:func:`batch`); also ``hung``."""


def as_verdict(value: object) -> bool | None:
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


def score_limit(task: Task) -> float | None:
    """The seconds ``task.score`` may run: its ``score_timeout`` (None: no limit), else
    :data:`SCORE_TIMEOUT_S`."""
    limit = getattr(task, "score_timeout", SCORE_TIMEOUT_S)
    if limit is not None and not (isinstance(limit, (int, float)) and limit > 0):
        raise ValueError(
            f"task {getattr(task, 'name', type(task).__name__)!r}: score_timeout = {limit!r}; "
            "use seconds > 0, or None for no limit"
        )
    return None if limit is None else float(limit)


def score_workers() -> int:
    """How many answers are scored at once: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Batch:
    """The calls of one batch so far: once none has answered and the hung ones and those still
    running make a whole wave (``wave`` calls), stop calling. (Counting the running ones too: a
    worker whose call hung first must not start another while its neighbour's hangs on.)"""

    def __init__(self, wave: int) -> None:
        self.wave = wave
        self.hung = self.answered = self.running = 0
        self.lock = threading.Lock()

    def start(self) -> bool:
        """Whether a call may start (and count it as running), or the batch is hopeless."""
        with self.lock:
            if self.answered == 0 and self.hung >= 1 and self.hung + self.running >= self.wave:
                return False
            self.running += 1
            return True

    def record(self, verdict: Verdict) -> None:
        with self.lock:
            self.running -= 1
            if verdict.hung:
                self.hung += 1
            else:
                self.answered += 1


_BATCH: contextvars.ContextVar[_Batch | None] = contextvars.ContextVar("agon_score_batch", default=None)


@contextlib.contextmanager
def batch(wave: int | None = None) -> Iterator[None]:
    """Score the calls inside as one batch (a training step, an evaluation): once ``wave``
    (:func:`score_workers`) calls have hung and none has returned, the rest are skipped."""
    token = _BATCH.set(_Batch(wave or score_workers()))
    try:
        yield
    finally:
        _BATCH.reset(token)


def step_concurrently(task: Task, steps: Sequence[Callable[[], None]]) -> None:
    """Run ``steps`` (each one env's ``step``, each scoring one answer of ``task``) on up to
    :func:`score_workers` threads, in this :func:`batch`; in the caller's thread, one after
    another, when the task has no limit (its scorer may need the main thread)."""
    if len(steps) < 2 or task is None or score_limit(task) is None or score_workers() < 2:
        for step in steps:
            step()
        return
    with ThreadPoolExecutor(min(len(steps), score_workers()), thread_name_prefix="agon-step") as pool:
        futures = [pool.submit(contextvars.copy_context().run, step) for step in steps]
        for future in futures:
            future.result()  # the first env error is raised, as a loop would raise it


def score_answer(task: Task, problem: Problem, answer: str) -> Verdict:
    """``task.score(problem, answer)`` as a :class:`Verdict`, within the task's wall-clock limit
    (:func:`score_limit`, the module docstring); never raises, never hangs but as said there."""
    limit = score_limit(task)
    if limit is None:
        return _judge(task, problem, answer)
    scope = _BATCH.get()
    if scope is not None and not scope.start():
        return Verdict(False, timeout=True, hung=True, skipped=True)
    box: list[Verdict] = []
    worker = threading.Thread(
        target=lambda: box.append(_judge(task, problem, answer)), daemon=True, name="agon-score"
    )
    worker.start()
    worker.join(limit)
    verdict = box[0] if box else Verdict(False, timeout=True, hung=True)  # abandoned: cannot be stopped
    if scope is not None:
        scope.record(verdict)
    return verdict


def _judge(task: Task, problem: Problem, answer: str) -> Verdict:
    try:
        value = task.score(problem, answer)
    except VerifierTimeout:
        return Verdict(False, timeout=True)
    except Exception:
        return Verdict(False, error=traceback.format_exc())
    verdict = as_verdict(value)
    if verdict is None:
        shown = repr(value)[:200]
        return Verdict(False, error=f"{_RETURNED}{shown} ({type(value).__name__}){_NOT_A_BOOL}")
    return Verdict(verdict)


_RETURNED, _NOT_A_BOOL = "score() returned ", ", not a bool"
"""How :func:`_judge` words a non-verdict, which :func:`failure_of` reads back."""


def failure_of(error: str) -> str:
    """How a ``score`` that gave no verdict failed, after "score()": ``"returned nan (float)
    instead of a bool"`` for a value that is no verdict, ``"raised"`` for an exception (whose
    traceback ``error`` is): a NaN was never raised, so it is not reported as if it were."""
    if error.startswith(_RETURNED) and error.endswith(_NOT_A_BOOL):
        return f"returned {error[len(_RETURNED) : -len(_NOT_A_BOOL)]} instead of a bool"
    return "raised"


_WARNED: set[tuple[str, str]] = set()
"""``(task name, kind)`` already reported: once per task and kind per process."""


def limit_text(task: Task) -> str:
    """The task's own limit in words: ``"its score_timeout of 3 s"`` (or the default's)."""
    limit = score_limit(task)
    if limit is None:
        return "no limit (score_timeout = None)"
    own = getattr(task, "score_timeout", None) is not None
    return f"its score_timeout of {limit:g} s" + ("" if own else " (the default: the task sets none)")


def warn_once(task: Task, verdict: Verdict) -> None:
    """Show the first error and the first timeout of each task as a warning."""
    task_name = getattr(task, "name", type(task).__name__)
    kinds = (("skipped", verdict.skipped), ("hung", verdict.hung), ("timeout", verdict.timeout))
    kind = next((k for k, on in kinds if on), "error" if verdict.error else None)
    if kind is None or (task_name, kind) in _WARNED:
        return
    _WARNED.add((task_name, kind))
    if verdict.skipped:
        text = (
            f"task {task_name!r}: score() hung on every call of this batch so far ({limit_text(task)}); "
            "its remaining answers are not scored: each scores 0 and counts in score_timeouts."
        )
    elif verdict.hung:
        text = (
            f"task {task_name!r}: score() did not return within its wall-clock limit "
            f"({limit_text(task)}); the call is abandoned in a background "
            "thread, the turn scores 0 and counts in score_timeouts."
        )
    elif verdict.timeout:
        text = f"task {task_name!r}: score() timed out; the turn scores 0 and counts in score_timeouts."
    else:
        how = failure_of(verdict.error or "")
        text = f"task {task_name!r}: score() {how}; the turn scores 0." + (
            f" First error:\n{verdict.error}" if how == "raised" else ""
        )
    gymnasium.logger.warn("%s", text)  # the text itself may hold a '%': never a format string


def judge(task: Task, problem: Problem, parsed: Parsed, length: int) -> tuple[Outcome, Verdict]:
    """One parsed completion as the env judges it: its answer scored (none: wrong, no verdict
    needed), the first error and timeout of the task warned about, and the :class:`Outcome`
    its reward is computed from. Every turn of the env and every completion
    :mod:`agon_env.integrations.trl` scores come through here."""
    verdict = score_answer(task, problem, parsed.answer) if parsed.answer else Verdict(False)
    warn_once(task, verdict)
    return Outcome(correct=verdict.correct, format_ok=parsed.format_ok, length=length), verdict
