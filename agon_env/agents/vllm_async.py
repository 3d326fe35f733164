"""The vLLM backend on vLLM's async engine: calls from many threads at once, batched continuously.

:class:`AsyncVLLMBackend` keeps :class:`~agon_env.agents.vllm_backend.VLLMBackend`'s contract (one
engine on the frozen base, every adapter a ``LoRARequest``, the same completions) but runs
``vllm.v1.engine.async_llm.AsyncLLM`` instead of ``vllm.LLM``. ``generate`` may be called from any
number of threads at once: each call's rows become requests of the one engine, whose scheduler
admits them between decode steps alongside whatever else is generating (continuous batching). A
call made while another generates starts at once instead of waiting for it, which is what a server
needs (``agon serve --engine vllm``); ``vllm.LLM.generate`` holds the engine for a whole call.

The engine lives on an event loop of its own, in a daemon thread started with it: its output
handler and its sockets belong to that loop, and callers block on their call's future. ``stream``
hears each row's text token by token as the engine's outputs arrive (on the engine's thread).

A call made for a request that is given up (a server's time-out, a client gone:
:func:`~agon_env.agents.aborting.current`) has its rows aborted in the engine (``AsyncLLM.abort``
with their request ids), so the engine stops spending decode steps on them, and raises
:class:`~agon_env.agents.aborting.Aborted`.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from agon_env.agents import aborting
from agon_env.agents.protocol import Completion, SamplingParams
from agon_env.agents.streaming import Emit, TextDeltas
from agon_env.agents.vllm_backend import Row, VLLMBackend, cut_at_stop

T = TypeVar("T")


class AsyncVLLMBackend(VLLMBackend):
    """A :class:`VLLMBackend` whose ``generate`` calls from several threads share the engine."""

    continuous = True
    """The engine admits a new call between decode steps: a server need not batch requests itself."""

    def _start_engine(self, **engine_kwargs: Any) -> None:
        # One tokenizer for this backend's threads (callers encode, the engine's thread decodes),
        # behind a lock: a fast tokenizer used from two threads at once can fail ("Already borrowed").
        self.tokenizer = copy.deepcopy(self.tokenizer)
        self._tokenizing = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agon-vllm-engine", daemon=True)
        self._thread.start()
        self.engine = self._call(_async_llm({"disable_log_stats": True, **engine_kwargs}))

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the engine's loop; block this thread until it ends."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _remove_lora(self, lora_id: int) -> None:
        self._call(self.engine.remove_lora(lora_id))

    def _encode(self, prompt: str) -> list[int]:
        with self._tokenizing:
            return super()._encode(prompt)

    def _decode(self, token_ids: Sequence[int]) -> str:
        with self._tokenizing:
            return super()._decode(token_ids)

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        adapter: str | Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
        stream: Emit | None = None,
    ) -> list[Completion]:
        """Same contract as :meth:`VLLMBackend.generate`; each row is a request of its own, scheduled
        by the engine with every other call's; ``stream`` hears each row's text token by token."""
        params = params or SamplingParams()
        abort = aborting.current() or aborting.Abort()
        rows = self._rows(prompts, params, adapter, seeds)
        if not rows:
            return []
        deltas = None if stream is None else TextDeltas(_Locked(self.tokenizer, self._tokenizing), stream)
        ids = [uuid.uuid4().hex for _ in rows]

        def end() -> None:  # in the thread that gives the request up: over to the engine's loop
            asyncio.run_coroutine_threadsafe(self.engine.abort(ids), self._loop)

        with abort.on_set(end):
            outputs = self._call(self._all(rows, ids, params, deltas, abort))
        if abort.is_set:
            raise aborting.Aborted(f"{len(ids)} engine requests aborted: the request was given up")
        completions = [self._completion(r, o, params) for r, o in zip(rows, outputs, strict=True)]
        for i, c in enumerate(completions) if deltas is not None else ():
            deltas.finish(i, c.text)
        return completions

    async def _all(
        self,
        rows: list[Row],
        ids: list[str],
        params: SamplingParams,
        deltas: TextDeltas | None,
        abort: aborting.Abort,
    ) -> list[Any]:
        ones = (
            self._one(i, r, d, params, deltas, abort) for i, (r, d) in enumerate(zip(rows, ids, strict=True))
        )
        return list(await asyncio.gather(*ones))

    async def _one(
        self,
        index: int,
        row: Row,
        request_id: str,
        params: SamplingParams,
        deltas: TextDeltas | None,
        abort: aborting.Abort,
    ) -> Any:
        """Row ``index``'s last output (None when the request was given up before it started). Where
        a stop string counts only after a marker (which vLLM cannot check), the request is ended here
        as soon as one is written, as the HF backend stops."""
        if abort.is_set:  # given up before the engine heard of it: an abort would have found nothing
            return None
        outputs = self.engine.generate(
            {"prompt_token_ids": row.ids}, row.params, request_id, lora_request=row.lora
        )
        last, heard = None, 0
        try:
            async for out in outputs:
                if abort.is_set:  # given up while the abort was on its way: leaving aborts it too
                    break
                last = out.outputs[0]
                tokens = list(last.token_ids)
                keep = self._cut(tokens, params) if params.stop_after and params.stop else len(tokens)
                ended, tokens = keep < len(tokens), tokens[:keep]
                if deltas is not None and len(tokens) > heard:
                    deltas.add(index, tokens[heard:])
                    heard = len(tokens)
                if ended:
                    break
        finally:
            await outputs.aclose()  # a request left early is aborted in the engine
        assert last is not None or abort.is_set, "vLLM ended a request without an output"
        return last

    def _cut(self, tokens: list[int], params: SamplingParams) -> int:
        with self._tokenizing:
            return cut_at_stop(self.tokenizer, tokens, params)

    def close(self) -> None:
        """Stop the engine (its core process), then its loop and thread."""
        engine = getattr(self, "engine", None)
        if engine is not None:
            self._loop.call_soon_threadsafe(engine.shutdown)
            self.engine = None
        loop = getattr(self, "_loop", None)
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=30)
        self.llm = None
        super().close()


class _Locked:
    """A tokenizer's ``decode`` behind the backend's lock (for :class:`TextDeltas`)."""

    def __init__(self, tokenizer: Any, lock: threading.Lock) -> None:
        self.tokenizer, self.lock = tokenizer, lock

    def decode(self, token_ids: Sequence[int], **how: Any) -> str:
        with self.lock:
            return self.tokenizer.decode(list(token_ids), **how)


async def _async_llm(engine_kwargs: dict[str, Any]) -> Any:
    """vLLM's async engine, made on the loop that will run it."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs))
