"""``agon serve``'s app: a run's pair behind an OpenAI-compatible API (an ASGI app, starlette).

=========================  ===================================================================
route                      what it does
=========================  ===================================================================
``GET /v1/models``         the models: ``cascade``, ``<run>/agent_a``, ``<run>/agent_b``
``POST /v1/chat/completions``  the last user message is the question. ``cascade``: the drafter
                           drafts, the challenger answers after reading the draft as the run's
                           channel shows it; the reply is the challenger's turn, and the draft
                           is in the extra field ``agon`` (:func:`cascade_extra`).
                           ``<run>/<adapter>``: that adapter alone (``agon eval``'s standalone)
``GET /health``            200 when the app is up (no key needed, as vLLM's), with how many
                           batches and requests it has run and its largest batch
=========================  ===================================================================

Every model uses the run's own prompts (its system prompt and worked examples) and each adapter's
own sampling: the pair was trained on single questions in that format, so earlier messages and a
request's sampling fields (``temperature``, ``max_tokens``...) are not read. ``n`` > 1 and
``stream`` are refused.

Errors are JSON in OpenAI's shape (``{"error": {"message", "type", "code"}}``): 401 without the
API key (``Authorization: Bearer KEY``, checked as vLLM's ``--api-key`` checks it), 400 for a body
that is not JSON, no user message or a prompt over the model's window, 404 for an unknown model.
A refused request changes nothing for the others.

Requests are micro-batched (:class:`Batcher`): those that arrive while a batch is generating, or
within ``window_s`` of the first, are answered by the next batched call (one per model asked for),
so concurrent clients share each forward pass instead of queueing behind one another.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agon_env.serving.cascade import Cascade, CascadeAnswer, QuestionError, Stage

CASCADE_MODEL = "cascade"
EXTRA = "agon"
"""The extra response field of a ``cascade`` reply (OpenAI clients keep unknown fields:
``response.model_extra["agon"]`` in the ``openai`` package)."""


def error(
    status: int, message: str, kind: str = "invalid_request_error", code: str | None = None
) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code or str(status)}}, status)


def cascade_extra(a: CascadeAnswer) -> dict[str, Any]:
    """What a ``cascade`` reply carries besides the final turn: the draft, what the challenger read,
    the parsed final answer, and each stage's tokens and seconds."""
    return {
        "draft": dataclasses.asdict(a.draft),
        "shown": a.shown,
        "challenger_text": a.challenger_text,
        "challenge": dataclasses.asdict(a.challenge),
        "answer": a.answer,
    }


class Batcher:
    """Collects concurrent requests into batches and runs each batch in one worker thread."""

    def __init__(self, cascade: Cascade, window_s: float = 0.01, max_batch: int = 32) -> None:
        self.cascade, self.window_s, self.max_batch = cascade, window_s, max_batch
        self.queue: asyncio.Queue[tuple[str, str, asyncio.Future[Any]]] | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="agon-generate")  # one model, one at a time
        self.batches: list[int] = []
        """The size of every batch run so far (the tests read it: concurrency really batches)."""
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.queue = asyncio.Queue()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, model: str, question: str) -> Any:
        """``model``'s answer to ``question`` (a :class:`CascadeAnswer` or a :class:`Stage`)."""
        assert self.queue is not None, "the batcher is started with the app"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.queue.put((model, question, future))
        return await future

    async def _loop(self) -> None:
        assert self.queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            deadline = loop.time() + self.window_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), max(0.0, deadline - loop.time())))
                except asyncio.TimeoutError:
                    break
            self.batches.append(len(batch))
            groups: dict[str, list[tuple[str, asyncio.Future[Any]]]] = {}
            for model, question, future in batch:
                groups.setdefault(model, []).append((question, future))
            for model, items in groups.items():
                await self._run(model, items, alone_on_failure=len(items) > 1)

    async def _run(
        self, model: str, items: list[tuple[str, asyncio.Future[Any]]], alone_on_failure: bool
    ) -> None:
        """Answer ``items`` in one batched call. When the call fails, each is asked again alone, so
        only the request that broke it gets the error; nothing raised here ends the loop."""
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self.executor, self._generate, model, [q for q, _ in items])
            if len(results) != len(items):
                raise RuntimeError(f"{len(results)} answers for {len(items)} questions")
        except Exception as exc:  # the server goes on
            if alone_on_failure:
                for item in items:
                    await self._run(model, [item], alone_on_failure=False)
                return
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(items, results, strict=True):
            if not future.done():  # a client that went away cancelled its future
                future.set_result(result)

    def _generate(self, model: str, questions: Sequence[str]) -> list[Any]:
        if model == CASCADE_MODEL:
            return list(self.cascade.answer_many(questions))
        return list(self.cascade.alone_many(model.rpartition("/")[2], questions))


def _question(messages: Any) -> str | None:
    """The last user message's text (a string, or the text parts of a content list)."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
                if not all(isinstance(part, str) for part in parts):
                    return None  # a text part whose text is no string: a 400, like no text at all
                content = "\n".join(parts)
            return content if isinstance(content, str) else None
    return None


def _usage(stages: Sequence[Stage]) -> dict[str, int]:
    prompt = sum(s.prompt_tokens for s in stages)
    completion = sum(s.completion_tokens for s in stages)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def build_app(
    cascade: Cascade, *, api_key: str | None = None, window_s: float = 0.01, max_batch: int = 32
) -> Starlette:
    """The ASGI app serving ``cascade`` (``uvicorn.run(build_app(...))``)."""
    batcher = Batcher(cascade, window_s, max_batch)
    adapters = {f"{cascade.label}/{name}": name for name in cascade.agents}
    models = [CASCADE_MODEL, *adapters]
    created = int(time.time())

    async def models_route(request: Request) -> JSONResponse:
        data = [{"id": m, "object": "model", "created": created, "owned_by": "agon"} for m in models]
        return JSONResponse({"object": "list", "data": data})

    async def health(request: Request) -> JSONResponse:
        sizes = batcher.batches
        return JSONResponse(
            {
                "status": "ok",
                "engine": cascade.engine,
                "batches": len(sizes),
                "requests": sum(sizes),
                "largest_batch": max(sizes, default=0),
            }
        )

    async def chat(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body())
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
            return error(400, "the request body is not valid JSON")
        if not isinstance(body, dict):
            return error(400, "the request body must be a JSON object")
        model = body.get("model")
        if model not in models:
            return error(404, f"unknown model {model!r}; models: {', '.join(models)}", code="model_not_found")
        if body.get("stream") or body.get("n", 1) not in (1, None):
            return error(400, "stream and n > 1 are not supported; ask for one completion")
        question = _question(body.get("messages"))
        if question is None:
            return error(400, "messages must be a list holding a user message with text content")
        try:
            cascade.check(question, None if model == CASCADE_MODEL else adapters[model])
        except QuestionError as exc:
            return error(400, str(exc), code="context_length_exceeded" if "window" in str(exc) else None)
        try:
            result = await batcher.submit(model, question)
        except Exception as exc:  # a defect, not the request's fault: 500, and the server goes on
            return error(500, f"generation failed: {exc}", kind="server_error")
        final = result.challenge if isinstance(result, CascadeAnswer) else result
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": final.completion},
                    "finish_reason": final.finish_reason,
                }
            ],
            "usage": _usage(
                [result.draft, result.challenge] if isinstance(result, CascadeAnswer) else [result]
            ),
        }
        if isinstance(result, CascadeAnswer):
            reply[EXTRA] = cascade_extra(result)
        return JSONResponse(reply)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()
            cascade.close()  # vLLM's engine core is a process of its own: stopped with the server

    app = Starlette(
        routes=[
            Route("/v1/models", models_route, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.batcher = batcher
    if api_key:
        app.add_middleware(_KeyCheck, api_key=api_key)
    return app


class _KeyCheck:
    """Refuses ``/v1/*`` requests without ``Authorization: Bearer KEY`` (401), as vLLM's server does."""

    def __init__(self, app: Any, api_key: str) -> None:
        self.app, self.expected = app, f"Bearer {api_key}"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1"):
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected.encode("latin-1")):  # no timing hint
                await error(401, "missing or wrong API key", code="invalid_api_key")(scope, receive, send)
                return
        await self.app(scope, receive, send)
