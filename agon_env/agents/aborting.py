"""Ending a call early: a served request that timed out or whose client went away.

A server runs a request's call (a cascade's stages, each an agent's ``generate``) in a worker thread
that it cannot interrupt. It hands the request's :class:`Abort` down through a context variable
(:func:`aborting`) instead of through every layer's signature: a backend that can end its engine's
requests (vLLM's async engine, :class:`~agon_env.agents.vllm_async.AsyncVLLMBackend`) reads
:func:`current`, ends them when the abort is set, and raises :class:`Aborted` so the stages after it
do not start. A backend that cannot drop one row of a running batch (HF) ignores it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar


class Aborted(RuntimeError):
    """The call was ended because its request was given up (time-out, client gone)."""


class Abort:
    """Set once, from any thread; each callback registered with :meth:`on_set` then runs once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._callbacks: list[Callable[[], None]] = []

    @property
    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        with self._lock:
            if self._set:
                return
            self._set, callbacks = True, list(self._callbacks)
        for callback in callbacks:
            callback()

    @contextlib.contextmanager
    def on_set(self, callback: Callable[[], None]) -> Iterator[None]:
        """Run ``callback`` when the abort is set while inside the block (at once if it is already)."""
        with self._lock:
            late = self._set
            if not late:
                self._callbacks.append(callback)
        if late:
            callback()
        try:
            yield
        finally:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)


_CURRENT: ContextVar[Abort | None] = ContextVar("agon_abort", default=None)


def current() -> Abort | None:
    """The abort of the request this thread's call serves, if a server gave one."""
    return _CURRENT.get()


@contextlib.contextmanager
def aborting(abort: Abort | None) -> Iterator[None]:
    """Calls made inside the block serve the request that ``abort`` ends."""
    token = _CURRENT.set(abort)
    try:
        yield
    finally:
        _CURRENT.reset(token)
