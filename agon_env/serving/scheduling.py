"""How ``agon serve`` hands requests to the engine: each at once, and the engine batches them continuously.

Both engines batch by decode step: the HF engine (:mod:`agon_env.agents.engine`, one running batch
per shared base) and vLLM's async engine each admit a request at their next step and drop it when it
ends, so the server batches nothing itself. Every request runs its call (a cascade's stages, or an
adapter alone) in a worker thread of its own (:class:`Batcher`), at most ``max_batch`` at once; the
engine shares each forward pass among all of them. ``window_s`` delays each call that long first, so
the requests of a burst reach the engine at one step and are prefilled together (their common prompt
prefix once). At most ``max_queue`` requests wait or generate at once; more are refused
(:class:`QueueFull`), not held. The queue depth (``pending``) counts a request until its call has
ended, so it is the engine's real backlog.

A request given up (its time-out passed, or a streaming client went away and the server cancelled
it) sets its job's :class:`~agon_env.agents.aborting.Abort`: its call serves under that abort, and
both engines end its rows at their next decode step (the HF engine frees their KV rows then) and
raise :class:`~agon_env.agents.aborting.Aborted`, so the stages after it never start. A server
cancels a request by cancelling the future :meth:`Batcher.submit` awaits (``asyncio.wait_for``'s
time-out, or ``task.cancel()`` when the client disconnects): nothing else is needed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agon_env.agents.aborting import Abort, aborting
from agon_env.agents.engine import Engine, engine_for
from agon_env.agents.hf_backend import HFBackend
from agon_env.serving.cascade import Cascade

CASCADE_MODEL = "cascade"
"""The model id of the cascade (an adapter alone is ``<name>/<adapter>``)."""

Listen = Callable[[str, str], None]
"""``(stage, text)``: a request's next piece of text (:data:`~agon_env.serving.cascade.DRAFT` or
:data:`~agon_env.serving.cascade.ANSWER`), as the engine generates it."""


class QueueFull(RuntimeError):
    """More requests than ``max_queue`` wait or generate: the client is told to retry (503)."""


@dataclasses.dataclass
class Job:
    """One request for the engine."""

    model: str
    question: str
    sampling: tuple[tuple[str, Any], ...]
    """The answering stage's overrides."""
    seed: int
    future: asyncio.Future[Any]
    listen: Listen | None = None
    """Told ``(stage, text)`` on the event loop as the question's tokens are generated (streaming)."""
    abort: Abort = dataclasses.field(default_factory=Abort)
    """Set when the request is given up (time-out, client gone): its call is ended at the next step."""
    heard: bool = False
    """Whether ``listen`` has been sent a piece."""
    arrived: float = dataclasses.field(default_factory=time.perf_counter)
    started: float | None = None
    """When its generate call began: ``started - arrived`` is its queue time."""


class Batcher:
    """Sends each request to the engine in a worker thread of its own; the engine batches them."""

    def __init__(
        self, cascade: Cascade, window_s: float = 0.01, max_batch: int = 32, max_queue: int = 256
    ) -> None:
        self.cascade, self.window_s, self.max_batch, self.max_queue = cascade, window_s, max_batch, max_queue
        self.executor = ThreadPoolExecutor(max_batch, thread_name_prefix="agon-generate")
        self.requests = 0
        """Requests sent to the engine so far."""
        self.pending = 0
        """Requests submitted whose call has not ended (queued or generating): the queue depth."""
        self.running = 0
        """Of those, the ones in a generate call now (the rest wait: ``pending - running``)."""
        self.on_start: Callable[[str, float], None] = lambda model, queued_s: None
        """Told ``(model, seconds queued)`` as each job's generate call begins (``/metrics``)."""
        self.queue: Any = None
        self._running: set[asyncio.Task[None]] = set()

    @property
    def batches(self) -> collections.Counter[int]:
        """The batches requests joined (``/health``), as a count per batch size: on HF, the engine's
        prefills (the requests admitted at one step together; a cascade's request is two stages, so
        two prefills at least); else one batch of one per request sent."""
        engines = hf_engines(self.cascade)
        if not engines:
            return collections.Counter({1: self.requests} if self.requests else {})
        return sum((e.prefills for e in engines), collections.Counter())

    def engine_counts(self) -> dict[str, float] | None:
        """:func:`engine_counts` of the cascade it serves (``/health``)."""
        return engine_counts(self.cascade)

    async def start(self) -> None:
        self.queue = True  # marks the scheduler started

    async def stop(self) -> None:
        for task in self._running:
            task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def submit(
        self,
        model: str,
        question: str,
        sampling: Mapping[str, Any] | None = None,
        seed: int | None = None,
        listen: Listen | None = None,
    ) -> Any:
        """``model``'s answer to ``question`` (a :class:`CascadeAnswer` or a :class:`Stage`);
        :class:`QueueFull` at once when ``max_queue`` requests are pending already. Cancelling the
        awaiting task ends the request's generation at the engine's next step."""
        assert self.queue is not None, "the scheduler is started with the app"
        if self.pending >= self.max_queue:
            raise QueueFull(
                f"{self.pending} requests are queued or generating (--max-queue {self.max_queue})"
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        key = tuple(sorted((sampling or {}).items()))
        root = getattr(self.cascade, "seed", 0) if seed is None else seed
        job = Job(model, question, key, root, future, listen)
        self.pending += 1
        self.requests += 1
        task = asyncio.create_task(self._run(job))
        self._running.add(task)
        task.add_done_callback(self._done)
        try:
            return await future
        finally:
            if future.cancelled():  # given up (``wait_for``'s time-out, the stream cancelled)
                job.abort.set()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self.pending -= 1

    async def _run(self, job: Job) -> None:
        """Answer ``job``; nothing raised here ends the server."""
        loop = asyncio.get_running_loop()
        try:
            if self.window_s > 0:
                await asyncio.sleep(self.window_s)
            if job.future.done():  # given up before it reached the engine
                return
            job.started = time.perf_counter()
            self.on_start(job.model, job.started - job.arrived)
            self.running += 1
            try:
                results = await loop.run_in_executor(self.executor, generate, self.cascade, [job], loop)
            finally:
                self.running -= 1
            if len(results) != 1:
                raise RuntimeError(f"{len(results)} answers for 1 question")
        except Exception as exc:  # the server goes on
            if not job.future.done():
                job.future.set_exception(exc)
            return
        if not job.future.done():  # a client that went away cancelled its future
            job.future.set_result(results[0])


def hf_engines(cascade: Any) -> list[Engine]:
    """The HF generation engines ``cascade``'s agents run on, each once (none on vLLM)."""
    engines = {
        id(e): e
        for agent in getattr(cascade, "agents", {}).values()
        if isinstance(getattr(agent, "backend", None), HFBackend)
        for e in [engine_for(agent.backend)]
    }
    return list(engines.values())


def engine_counts(cascade: Any) -> dict[str, float] | None:
    """The HF engine's :meth:`~agon_env.agents.engine.Engine.counts` under ``cascade`` (summed where
    the agents have engines of their own); None on an engine that counts none (vLLM). What
    ``/health`` reports and ``benchmarks/serve_bench.py`` reads in-process."""
    engines = hf_engines(cascade)
    if not engines:
        return None
    each = [e.counts() for e in engines]
    return {k: sum(c[k] for c in each) for k in each[0]}


class Direct(Batcher):
    """:class:`Batcher` without a window and with a worker per queued request, for vLLM's async
    engine (:attr:`Cascade.continuous`), which bounds its running batch itself."""

    def __init__(self, cascade: Cascade, max_queue: int = 256) -> None:
        super().__init__(cascade, 0.0, max_queue, max_queue)


def generate(cascade: Cascade, items: Sequence[Job], loop: asyncio.AbstractEventLoop) -> list[Any]:
    """``items`` (one model, one sampling) answered by one call of ``cascade``, in a worker thread;
    each job's listener hears its text on ``loop`` as it is generated."""
    model, sampling = items[0].model, dict(items[0].sampling)
    questions, seeds = [j.question for j in items], [j.seed for j in items]
    listeners = [j.listen for j in items]

    def stream(index: int, stage: str, text: str) -> None:  # in the worker thread: over to the loop
        listen = listeners[index]
        if listen is not None:
            items[index].heard = True
            loop.call_soon_threadsafe(listen, stage, text)

    kwargs: dict[str, Any] = {"sampling": sampling, "seeds": seeds}
    if any(listeners):
        kwargs["stream"] = stream
    # A call for one request ends when it is given up; the engine drops its rows at its next step.
    with aborting(items[0].abort) if len(items) == 1 else contextlib.nullcontext():
        if model != CASCADE_MODEL:
            return list(cascade.alone_many(model.rpartition("/")[2], questions, **kwargs))
        return list(cascade.answer_many(questions, **kwargs))
