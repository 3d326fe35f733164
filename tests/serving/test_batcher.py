"""`server.Batcher` without a model: concurrent requests share a call; one bad one fails alone."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("starlette")

from agon_env.serving.scheduling import CASCADE_MODEL, Batcher


class Pair:
    """Stands in for a Cascade: answers every question in upper case; "boom" breaks a whole call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def answer_many(self, questions: list[str], **how: object) -> list[str]:
        self.calls.append(list(questions))
        if "boom" in questions:
            raise RuntimeError("the engine refused the batch")
        return [q.upper() for q in questions]


def test_a_failing_request_fails_alone_and_the_rest_of_its_batch_is_answered() -> None:
    async def main() -> tuple[list[object], Pair]:
        pair = Pair()
        batcher = Batcher(pair, window_s=0.2, max_batch=8)  # type: ignore[arg-type]
        await batcher.start()
        try:
            asked = ["a", "b", "boom", "c"]
            asks = (batcher.submit(CASCADE_MODEL, q) for q in asked)
            got = await asyncio.gather(*asks, return_exceptions=True)
            after = await batcher.submit(CASCADE_MODEL, "d")  # the loop still serves
        finally:
            await batcher.stop()
        return [*got, after], pair

    got, pair = asyncio.run(main())
    assert got[:2] == ["A", "B"] and got[3:] == ["C", "D"]
    assert isinstance(got[2], RuntimeError) and "refused" in str(got[2])
    # one batched call for the four, then each alone to find the one that broke it, then "d"
    assert pair.calls == [["a", "b", "boom", "c"], ["a"], ["b"], ["boom"], ["c"], ["d"]]


def test_a_burst_of_clients_arriving_one_after_another_is_one_batch() -> None:
    """Clients of a burst connect one after another (the benchmark's 16 threads came 1 + 15 in two
    batches, the 15 waiting for the one's whole generation); each arrives within a window of the
    last, so all join the first batch, and a lone request still waits one window only."""

    async def main() -> tuple[Pair, float]:
        pair = Pair()
        batcher = Batcher(pair, window_s=0.02, max_batch=32)  # type: ignore[arg-type]
        await batcher.start()
        try:

            async def ask(i: int) -> object:
                await asyncio.sleep(0.008 * i)  # 16 clients over 120 ms: six windows
                return await batcher.submit(CASCADE_MODEL, f"q{i}")

            await asyncio.gather(*(ask(i) for i in range(16)))
            t0 = asyncio.get_running_loop().time()
            await batcher.submit(CASCADE_MODEL, "alone")
            alone = asyncio.get_running_loop().time() - t0
        finally:
            await batcher.stop()
        return pair, alone

    pair, alone = asyncio.run(main())
    assert pair.calls == [[f"q{i}" for i in range(16)], ["alone"]]
    assert alone < 0.5


class Streaming(Pair):
    """A Pair whose calls stream each answer (as the draft stage) before "boom" breaks the call."""

    def answer_many(self, questions: list[str], **how: object) -> list[str]:
        stream = how.get("stream")
        for i, q in enumerate(questions):
            if callable(stream):
                stream(i, "draft", q.upper())
        return super().answer_many(questions, **how)


def test_a_streamed_request_of_a_failed_batch_is_not_streamed_again() -> None:
    """A batch that fails is asked again row by row; a streaming request whose pieces are already
    sent fails (its stream ends with an error event) instead of hearing its text a second time, and a
    request that heard nothing is answered by its retry."""

    async def main() -> tuple[list[object], list[str], Streaming]:
        pair = Streaming()
        batcher = Batcher(pair, window_s=0.2, max_batch=8)  # type: ignore[arg-type]
        await batcher.start()
        heard: list[str] = []
        try:
            asks = (
                batcher.submit(CASCADE_MODEL, "a", listen=lambda stage, text: heard.append(text)),
                batcher.submit(CASCADE_MODEL, "b"),
                batcher.submit(CASCADE_MODEL, "boom"),
            )
            got = await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await batcher.stop()
        return got, heard, pair

    got, heard, pair = asyncio.run(main())
    assert heard == ["A"]  # once, not again from a retry
    assert isinstance(got[0], RuntimeError) and "refused" in str(got[0])
    assert got[1] == "B" and isinstance(got[2], RuntimeError)
    assert pair.calls == [["a", "b", "boom"], ["b"], ["boom"]]
