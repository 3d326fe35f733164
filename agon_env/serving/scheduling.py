"""How ``agon serve`` hands requests to the engine: micro-batched on HF, at once on vLLM's async engine.

On the HF engine requests are micro-batched (:class:`Batcher`): those that arrive while a batch is
generating, or within ``window_s`` of the one before (up to ``BURST_WINDOWS`` windows), are answered
by the next batched call (one per model and sampling asked for), so concurrent clients share each
forward pass; a request waits for the batch in progress to end. On vLLM's async engine
(:class:`Direct`) each request goes to the engine at once and the engine batches continuously: a
request is admitted between decode steps.
At most ``max_queue`` requests wait or generate at once; more are refused (:class:`QueueFull`), not
held.

A request given up (its time-out passed, or a streaming client went away and the server cancelled
it) sets its job's :class:`~agon_env.agents.aborting.Abort`. Its call, run alone (always on
:class:`Direct`), serves under that abort: vLLM's async engine aborts its requests at once, so the
engine stops generating for nobody. On HF a job given up before its batch starts is dropped; one
given up while its batch generates is generated to the end with the rest of its batch, since a batch
cannot drop one row between decode steps (the HF engine does not batch continuously).

When a batched call fails, each job is asked again alone, so only the request that broke it gets the
error, except a streaming job that has heard pieces already: a client cannot take text back, and a
retry would send the text again (or another text, if sampled), so that job fails with the batch's
error, which the server streams as an error event (vLLM's server does the same when its engine
fails mid-stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agon_env.agents.aborting import Abort, aborting
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
    """One question waiting for its batch."""

    model: str
    question: str
    sampling: tuple[tuple[str, Any], ...]
    """The answering stage's overrides (hashable: jobs that share them share a call)."""
    seed: int
    future: asyncio.Future[Any]
    listen: Listen | None = None
    """Told ``(stage, text)`` on the event loop as the question's tokens are generated (streaming)."""
    abort: Abort = dataclasses.field(default_factory=Abort)
    """Set when the request is given up (time-out, client gone): its call, run alone, is ended."""
    heard: bool = False
    """Whether ``listen`` has been sent a piece: such a job is not generated again after a failure."""
    arrived: float = dataclasses.field(default_factory=time.perf_counter)
    started: float | None = None
    """When its (first) generate call began: ``started - arrived`` is its queue time."""


BURST_WINDOWS = 25
"""A batch's first request waits at most this many batch windows for the rest of a burst."""


class Batcher:
    """Collects concurrent requests into batches and runs each batch in one worker thread."""

    def __init__(
        self,
        cascade: Cascade,
        window_s: float = 0.01,
        max_batch: int = 32,
        max_queue: int = 256,
        workers: int = 1,
        burst_s: float | None = None,
    ) -> None:
        self.cascade, self.window_s, self.max_batch, self.max_queue = cascade, window_s, max_batch, max_queue
        self.burst_s = BURST_WINDOWS * window_s if burst_s is None else burst_s
        """The longest a batch's first request waits for the rest of a burst (``window_s`` each)."""
        self.queue: asyncio.Queue[Job] | None = None
        # One model, one call at a time (HF); an engine that batches by itself takes a call per thread.
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="agon-generate")
        self.batches: list[int] = []
        """The size of every batch run so far (the tests read it: concurrency really batches)."""
        self.pending = 0
        """Requests submitted and not yet answered (queued or generating): the queue depth."""
        self.running = 0
        """Of those, the ones in a generate call now (the rest wait: ``pending - running``)."""
        self.on_start: Callable[[str, float], None] = lambda model, queued_s: None
        """Told ``(model, seconds queued)`` as each job's first generate call begins (``/metrics``)."""
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.queue = asyncio.Queue()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
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
        :class:`QueueFull` at once when ``max_queue`` requests are pending already."""
        assert self.queue is not None, "the batcher is started with the app"
        if self.pending >= self.max_queue:
            raise QueueFull(
                f"{self.pending} requests are queued or generating (--max-queue {self.max_queue})"
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        key = tuple(sorted((sampling or {}).items()))
        root = getattr(self.cascade, "seed", 0) if seed is None else seed
        job = Job(model, question, key, root, future, listen)
        self.pending += 1
        try:
            self._admit(job)
            return await future
        finally:
            self.pending -= 1
            if future.cancelled():  # given up (``wait_for``'s time-out, the stream cancelled)
                job.abort.set()

    def _admit(self, job: Job) -> None:
        assert self.queue is not None
        self.queue.put_nowait(job)  # unbounded: ``max_queue`` bounds it above

    async def _loop(self) -> None:
        assert self.queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            # The batch closes when no request has come for a window (a burst of clients connecting
            # one after another keeps it open), and at the latest ``burst_s`` after its first.
            latest = loop.time() + self.burst_s
            while len(batch) < self.max_batch:
                if not self.queue.empty():  # already here: taken whatever the time (no wait_for of 0)
                    batch.append(self.queue.get_nowait())
                    continue
                wait = min(self.window_s, latest - loop.time())
                if wait <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), wait))
                except asyncio.TimeoutError:
                    break
            batch = [job for job in batch if not job.future.done()]  # a client gone or timed out
            if not batch:
                continue
            self.batches.append(len(batch))
            groups: dict[tuple[str, Any], list[Job]] = {}
            for job in batch:
                groups.setdefault((job.model, job.sampling), []).append(job)
            for items in groups.values():
                await self._run(items, alone_on_failure=len(items) > 1)

    async def _run(self, items: list[Job], alone_on_failure: bool) -> None:
        """Answer ``items`` in one batched call. When the call fails, each is asked again alone, so
        only the request that broke it gets the error; nothing raised here ends the loop."""
        loop = asyncio.get_running_loop()
        now = time.perf_counter()
        for job in items:
            if job.started is None:
                job.started = now
                self.on_start(job.model, now - job.arrived)
        try:
            self.running += len(items)
            try:
                results = await loop.run_in_executor(self.executor, self._generate, items, loop)
            finally:
                self.running -= len(items)
            if len(results) != len(items):
                raise RuntimeError(f"{len(results)} answers for {len(items)} questions")
        except Exception as exc:  # the server goes on
            if alone_on_failure:
                for item in items:
                    if item.heard:  # its pieces are out: fails rather than streaming them again
                        if not item.future.done():
                            item.future.set_exception(exc)
                    else:
                        await self._run([item], alone_on_failure=False)
                return
            for job in items:
                if not job.future.done():
                    job.future.set_exception(exc)
            return
        for job, result in zip(items, results, strict=True):
            if not job.future.done():  # a client that went away cancelled its future
                job.future.set_result(result)

    def _generate(self, items: Sequence[Job], loop: asyncio.AbstractEventLoop) -> list[Any]:
        return generate(self.cascade, items, loop)


class Direct(Batcher):
    """Sends each request to the engine at once, in a worker thread of its own, for an engine that
    batches continuously (vLLM's async engine: :attr:`Cascade.continuous`). The engine admits a
    request between its decode steps, so one that arrives while others generate does not wait for
    them; batching requests here would only add the waits the engine avoids."""

    def __init__(self, cascade: Cascade, max_queue: int = 256) -> None:
        super().__init__(cascade, 0.0, 1, max_queue, workers=max_queue)
        self._running: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.queue = asyncio.Queue()  # unused: marks the scheduler started

    async def stop(self) -> None:
        for task in self._running:
            task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _admit(self, job: Job) -> None:
        self.batches.append(1)
        task = asyncio.create_task(self._run([job], alone_on_failure=False))
        self._running.add(task)
        task.add_done_callback(self._running.discard)


def generate(cascade: Cascade, items: Sequence[Job], loop: asyncio.AbstractEventLoop) -> list[Any]:
    """``items`` (one model, one sampling) answered by one call of ``cascade``, in a worker thread;
    each job's listener hears its text on ``loop`` as it is generated."""
    model, sampling = items[0].model, dict(items[0].sampling)
    questions, seeds = [j.question for j in items], [j.seed for j in items]
    listeners = [j.listen for j in items]

    def stream(index: int, stage: str, text: str) -> None:  # in the worker thread: over to the loop
        listen = listeners[index]
        if listen is not None:
            # Marked here, before the call can fail: ``_run`` reads it once the failure reaches it.
            items[index].heard = True
            loop.call_soon_threadsafe(listen, stage, text)

    kwargs: dict[str, Any] = {"sampling": sampling, "seeds": seeds}
    if any(listeners):
        kwargs["stream"] = stream
    # A call for one request ends when it is given up (where the engine can); a batch runs to its end.
    with aborting(items[0].abort) if len(items) == 1 else contextlib.nullcontext():
        if model != CASCADE_MODEL:
            return list(cascade.alone_many(model.rpartition("/")[2], questions, **kwargs))
        return list(cascade.answer_many(questions, **kwargs))
