"""A request given up (504, client gone) is aborted in vLLM's async engine: a stand-in engine, no vLLM."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("starlette")

from agon_env.agents.aborting import Aborted
from agon_env.agents.protocol import SamplingParams
from agon_env.agents.vllm_async import AsyncVLLMBackend
from agon_env.agents.vllm_backend import Row
from agon_env.serving.scheduling import CASCADE_MODEL, Direct

TOKENS = 200
"""The stand-in's request generates this many tokens, 10 ms apart, unless it is aborted."""


class Engine:
    """``AsyncLLM``'s ``generate``/``abort`` as the backend uses them: cumulative outputs; an aborted
    request ends with a last output (as vLLM's output processor sends one for an external abort)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.aborted: list[str] = []
        self.tokens: dict[str, int] = {}

    async def generate(self, prompt: Any, params: Any, request_id: str, lora_request: Any = None) -> Any:
        self.started.append(request_id)
        ids: list[int] = []
        for t in range(TOKENS):
            await asyncio.sleep(0.01)
            if request_id in self.aborted:
                break
            ids.append(t)
            self.tokens[request_id] = len(ids)
            yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=list(ids), finish_reason=None)])
        yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=list(ids), finish_reason="abort")])

    async def abort(self, request_id: str | list[str], internal: bool = False) -> None:
        self.aborted += [request_id] if isinstance(request_id, str) else list(request_id)


def backend(engine: Engine) -> AsyncVLLMBackend:
    """The async backend on the stand-in engine (its loop and thread, none of vLLM's set-up)."""
    b = AsyncVLLMBackend.__new__(AsyncVLLMBackend)
    b._loop = asyncio.new_event_loop()
    b._thread = threading.Thread(target=b._loop.run_forever, daemon=True)
    b._thread.start()
    b._tokenizing = threading.Lock()
    b.engine = engine
    b._rows = lambda prompts, params, adapter, seeds: [Row([1, 2], None, None, None) for _ in prompts]  # type: ignore[method-assign]
    b._decode = lambda ids: "x" * len(ids)  # type: ignore[method-assign]
    return b


class TwoStages:
    """Stands in for a continuous Cascade: a draft call, then an answer call, of one backend."""

    def __init__(self, b: AsyncVLLMBackend) -> None:
        self.b = b
        self.raised: list[BaseException] = []

    def answer_many(self, questions: list[str], **how: Any) -> list[str]:
        try:
            draft = self.b.generate(questions, SamplingParams())
            return [c.text for c in self.b.generate([d.text for d in draft], SamplingParams())]
        except BaseException as exc:
            self.raised.append(exc)
            raise


def test_a_request_past_its_time_out_is_aborted_in_the_engine_and_its_next_stage_never_starts() -> None:
    engine = Engine()
    b = backend(engine)
    stages = TwoStages(b)

    async def main() -> None:
        direct = Direct(stages, max_queue=4)  # type: ignore[arg-type]
        await direct.start()
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(direct.submit(CASCADE_MODEL, "q"), 0.2)
            await asyncio.sleep(0.3)
        finally:
            await direct.stop()

    try:
        asyncio.run(main())
        deadline = time.monotonic() + 5
        while not stages.raised and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        b._loop.call_soon_threadsafe(b._loop.stop)
    (request,) = engine.started  # the draft's request; the answer stage never started
    assert engine.aborted == [request]
    assert engine.tokens[request] < TOKENS // 2  # cut short, not generated to its end
    assert len(stages.raised) == 1 and isinstance(stages.raised[0], Aborted)
