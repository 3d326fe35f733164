"""`scheduling.Batcher`: each request is its own call at once (the engine batches them); one bad one
fails alone; the queue depth counts a given-up request until its call has ended."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

pytest.importorskip("starlette")

from agon_env.agents.aborting import Aborted, current
from agon_env.serving.scheduling import CASCADE_MODEL, Batcher


class Pair:
    """Stands in for a Cascade: answers every question in upper case; "boom" breaks its call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def answer_many(self, questions: list[str], **how: object) -> list[str]:
        self.calls.append(list(questions))
        if "boom" in questions:
            raise RuntimeError("the engine refused the request")
        return [q.upper() for q in questions]


def test_each_request_is_its_own_call_and_a_failing_one_fails_alone() -> None:
    async def main() -> tuple[list[object], Pair]:
        pair = Pair()
        batcher = Batcher(pair, window_s=0.01, max_batch=8)  # type: ignore[arg-type]
        await batcher.start()
        try:
            asks = (batcher.submit(CASCADE_MODEL, q) for q in ["a", "b", "boom", "c"])
            got = await asyncio.gather(*asks, return_exceptions=True)
            after = await batcher.submit(CASCADE_MODEL, "d")  # the scheduler still serves
        finally:
            await batcher.stop()
        return [*got, after], pair

    got, pair = asyncio.run(main())
    assert got[:2] == ["A", "B"] and got[3:] == ["C", "D"]
    assert isinstance(got[2], RuntimeError) and "refused" in str(got[2])
    assert sorted(pair.calls) == [["a"], ["b"], ["boom"], ["c"], ["d"]]  # no batch, no retries


class Endless(Pair):
    """A call that generates until its request's abort is set, then takes a moment to end (the
    engine's step in progress)."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = threading.Event()

    def answer_many(self, questions: list[str], **how: object) -> list[str]:
        self.calls.append(list(questions))
        abort = current()
        assert abort is not None
        seen = threading.Event()
        with abort.on_set(seen.set):
            seen.wait(10)
        time.sleep(0.2)
        self.ended.set()
        raise Aborted("given up")


def test_a_timed_out_request_stays_in_the_queue_depth_until_its_call_has_ended() -> None:
    """The old micro-batcher forgot a given-up request at once while its batch generated on."""

    async def main() -> tuple[int, int, bool, int]:
        pair = Endless()
        batcher = Batcher(pair, window_s=0.0, max_batch=4)  # type: ignore[arg-type]
        await batcher.start()
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(batcher.submit(CASCADE_MODEL, "long"), 0.2)
            given_up = batcher.pending  # its call still runs: still the engine's backlog
            for _ in range(100):  # the call sees its abort and ends
                if batcher.pending == 0:
                    break
                await asyncio.sleep(0.01)
            return given_up, batcher.pending, pair.ended.is_set(), len(pair.calls)
        finally:
            await batcher.stop()

    given_up, pending, ended, calls = asyncio.run(main())
    assert given_up == 1 and ended and pending == 0 and calls == 1
