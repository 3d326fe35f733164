"""``agon serve``'s app: a run's pair behind an OpenAI-compatible API (an ASGI app, starlette).

=========================  ===================================================================
route                      what it does
=========================  ===================================================================
``GET /v1/models``         the models: ``cascade``, ``<name>/agent_a``, ``<name>/agent_b`` (``name``:
                           ``--served-model-name``, else the run folder's name)
``POST /v1/chat/completions``  the last user message is the question. ``cascade``: the drafter
                           drafts, the challenger answers after reading the draft as the run's
                           channel shows it; the reply is the challenger's turn, and the draft
                           is in the extra field ``agon`` (:func:`cascade_extra`); streamed, the
                           draft comes first as ``reasoning_content`` (as vLLM streams a reasoning
                           model's thoughts) and the answer as ``content``.
                           ``<name>/<adapter>``: that adapter alone (``agon eval``'s standalone)
``GET /health``            200 when the app is up (no key needed, as vLLM's), with how many
                           batches and requests it has run and its largest batch
``GET /metrics``           Prometheus text (:mod:`~agon_env.serving.metrics`; no key needed)
=========================  ===================================================================

Every model uses the run's own prompts (its system prompt and worked examples): the pair was trained
on single questions in that format, so earlier messages are not read. A request's sampling fields
are honoured or refused by name (:mod:`~agon_env.serving.requests`).

Errors are JSON in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) on every
path and method: 401 without the API key (``Authorization: Bearer KEY``, checked as vLLM's
``--api-key`` checks it), 400 for a body that is not JSON or a field out of range, 404 for an
unknown model or path, 405 for a wrong method, 503 with ``Retry-After`` when the queue is full,
504 past the request time-out. A refused request changes nothing for the others, and an unexpected
failure is a JSON 500, never a plain-text one.

Requests are scheduled by :mod:`~agon_env.serving.scheduling` (each sent at once; the HF engine and
vLLM's async engine batch them by decode step). At most ``max_queue`` requests wait or generate at
once; more are told to retry (503), not held.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agon_env.seeding import derive_seed
from agon_env.serving.cascade import DRAFT, Cascade, CascadeAnswer, QuestionError, Stage
from agon_env.serving.metrics import CONTENT_TYPE, Metrics
from agon_env.serving.requests import ChatRequest, RequestError, parse_chat
from agon_env.serving.scheduling import CASCADE_MODEL, Batcher, Direct, Listen, QueueFull

EXTRA = "agon"
"""The extra response field of a ``cascade`` reply (OpenAI clients keep unknown fields:
``response.model_extra["agon"]`` in the ``openai`` package)."""
ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 503: "server_busy", 504: "timeout"}
"""OpenAI's ``type`` for a status (otherwise ``invalid_request_error`` below 500, ``server_error`` above)."""
RETRY_AFTER_S = 1


def error(
    status: int,
    message: str,
    kind: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    kind = kind or ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code or str(status)}}
    return JSONResponse(body, status, headers=dict(headers or {}))


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


def _usage(stages: Sequence[Stage]) -> dict[str, int]:
    prompt = sum(s.prompt_tokens for s in stages)
    completion = sum(s.completion_tokens for s in stages)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _stages(result: Any) -> list[Stage]:
    return [result.draft, result.challenge] if isinstance(result, CascadeAnswer) else [result]


def _final(result: Any, stop: Sequence[str]) -> tuple[str, str]:
    """The reply's text and finish reason: the answering stage's, cut before a request's own stop
    string (OpenAI does not return it; the run's ``</answer>`` stays, it is the answer format)."""
    final = result.challenge if isinstance(result, CascadeAnswer) else result
    text, reason = final.completion, final.finish_reason
    cuts = [text.find(s) for s in stop if s in text]
    if cuts:
        return text[: min(cuts)], "stop"
    return text, reason


def _seeds(request: ChatRequest, root: int) -> list[int]:
    """One seed per choice: the request's, else ``root`` (``agon serve --seed``), choice ``i``
    derived from it (a question's answer depends on the seed and the question only)."""
    seed = root if request.seed is None else request.seed
    return [seed if i == 0 else derive_seed(seed, "choice", i) for i in range(request.n)]


def _chunk(rid: str, created: int, model: str, delta: Mapping[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}
    data = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [choice],
    }
    return f"data: {json.dumps(data)}\n\n".encode()


def build_app(
    cascade: Cascade,
    *,
    api_key: str | None = None,
    window_s: float = 0.01,
    max_batch: int = 32,
    max_queue: int = 256,
    timeout_s: float = 600.0,
    served_name: str | None = None,
) -> Starlette:
    """The ASGI app serving ``cascade`` (``uvicorn.run(build_app(...))``).

    ``max_queue``: most requests pending at once (more get a 503 with ``Retry-After``);
    ``timeout_s``: a request not answered by then gets a 504; ``served_name``: the prefix of the
    adapters' model ids (default: the run folder's name)."""
    batcher = (
        Direct(cascade, max_queue)
        if getattr(cascade, "continuous", False)
        else Batcher(cascade, window_s, max_batch, max_queue)
    )
    metrics = Metrics(lambda: batcher.pending)
    root = getattr(cascade, "seed", 0)  # ``agon serve --seed``: seeds requests that bring none
    adapters = {f"{served_name or cascade.label}/{name}": name for name in cascade.agents}
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
                "requests": batcher.requests,
                "largest_batch": max(sizes, default=0),
                "queue_depth": batcher.pending,
            }
        )

    async def metrics_route(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def answer(request: ChatRequest, seed: int, listen: Listen | None = None) -> Any:
        return await asyncio.wait_for(
            batcher.submit(request.model, request.question, request.sampling, seed, listen), timeout_s
        )

    def parse(raw: bytes) -> ChatRequest:
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
            raise RequestError("the request body is not valid JSON") from None
        request = parse_chat(body, models)
        sampling = dict(request.sampling)
        if request.stop:
            sampling["stop"] = request.stop
        try:
            adapter = None if request.model == CASCADE_MODEL else adapters[request.model]
            cascade.check(request.question, adapter, sampling.get("max_new_tokens"))
        except QuestionError as exc:
            window = "window" in str(exc)
            raise RequestError(
                str(exc), "messages", code="context_length_exceeded" if window else None
            ) from None
        return dataclasses.replace(request, sampling=sampling)

    async def chat(http: Request) -> Response:
        t0 = time.perf_counter()
        model = "unknown"  # until the body names a served model
        try:
            request = parse(await http.body())
            model = request.model
            if request.stream:
                return stream(request, t0)
            results = await asyncio.gather(*(answer(request, s) for s in _seeds(request, root)))
            response = JSONResponse(reply(request, results))
        except RequestError as exc:
            response = error(exc.status, str(exc), code=exc.code, param=exc.param)
        except QueueFull as exc:
            response = error(
                503, f"the server is busy: {exc}; retry", headers={"Retry-After": str(RETRY_AFTER_S)}
            )
        except asyncio.TimeoutError:
            response = error(504, f"no answer within the request time-out of {timeout_s:g} s")
        except Exception as exc:  # a defect, not the request's fault: 500, and the server goes on
            response = error(500, f"generation failed: {type(exc).__name__}: {exc}")
        metrics.request(model, response.status_code, time.perf_counter() - t0)
        return response

    def reply(request: ChatRequest, results: Sequence[Any]) -> dict[str, Any]:
        choices, stages = [], []
        for i, result in enumerate(results):
            text, reason = _final(result, request.stop)
            choices.append(
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
            )
            stages += _stages(result)
        usage = _usage(stages)
        metrics.add_tokens(usage["prompt_tokens"], usage["completion_tokens"])
        out: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": choices,
            "usage": usage,
        }
        if isinstance(results[0], CascadeAnswer):
            out[EXTRA] = cascade_extra(results[0])
            if len(results) > 1:
                out[EXTRA]["choices"] = [cascade_extra(r) for r in results]
        return out

    def stream(request: ChatRequest, t0: float) -> StreamingResponse:
        """Server-sent chunks as the engine generates: the role, then for ``cascade`` the draft as
        ``reasoning_content`` and then the answer as ``content``, token by token, the finish reason,
        the usage chunk when ``stream_options.include_usage`` asks for it, then ``[DONE]``."""
        rid, made = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        pieces: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

        def chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
            return _chunk(rid, made, request.model, delta, finish)

        async def events() -> AsyncIterator[bytes]:
            status = 200
            task: asyncio.Future[Any] | None = None
            try:
                yield chunk({"role": "assistant", "content": ""})
                task = asyncio.ensure_future(
                    answer(
                        request,
                        _seeds(request, root)[0],
                        lambda stage, text: pieces.put_nowait((stage, text)),
                    )
                )
                reasoning, content = "", _Held(request.stop)
                while not task.done() or not pieces.empty():
                    if pieces.empty():
                        got = asyncio.ensure_future(pieces.get())
                        await asyncio.wait({task, got}, return_when=asyncio.FIRST_COMPLETED)
                        if not got.done():
                            got.cancel()
                            continue
                        stage, text = got.result()
                    else:
                        stage, text = pieces.get_nowait()
                    if stage == DRAFT:
                        reasoning += text
                        yield chunk({"reasoning_content": text})
                    elif new := content.add(text):
                        yield chunk({"content": new})
                try:
                    result = await task
                except QueueFull as exc:
                    status = 503
                    yield _error_event(503, f"the server is busy: {exc}; retry")
                    return
                except asyncio.TimeoutError:
                    status = 504
                    yield _error_event(504, f"no answer within the request time-out of {timeout_s:g} s")
                    return
                except Exception as exc:  # the stream has begun: the error is an event, as vLLM sends it
                    status = 500
                    yield _error_event(500, f"generation failed: {type(exc).__name__}: {exc}")
                    return
                text, reason = _final(result, request.stop)
                if isinstance(result, CascadeAnswer) and (rest := _rest(result.draft.completion, reasoning)):
                    yield chunk({"reasoning_content": rest})  # what a streaming engine held back
                if rest := _rest(text, content.sent):
                    yield chunk({"content": rest})
                yield chunk({}, reason)
                usage = _usage(_stages(result))
                metrics.add_tokens(usage["prompt_tokens"], usage["completion_tokens"])
                if request.include_usage:
                    data = {
                        "id": rid,
                        "object": "chat.completion.chunk",
                        "created": made,
                        "model": request.model,
                        "choices": [],
                        "usage": usage,
                    }
                    yield f"data: {json.dumps(data)}\n\n".encode()
            finally:
                if task is not None and not task.done():  # the client went away: give the request up
                    task.cancel()
                yield b"data: [DONE]\n\n"
                metrics.request(request.model, status, time.perf_counter() - t0)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        if status == 404:
            return error(404, f"no route {request.url.path}; the API is at /v1", code="not_found")
        if status == 405:
            return error(
                405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed"
            )
        return error(status, str(getattr(exc, "detail", "")) or "error")

    async def server_error(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error: {type(exc).__name__}")

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
            Route("/metrics", metrics_route, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
    app.state.batcher = batcher
    app.state.metrics = metrics
    if api_key:
        app.add_middleware(_KeyCheck, api_key=api_key)
    return app


class _Held:
    """The answer's streamed text, held back where it may be the start of a request's stop string
    (the reply ends before a stop string and does not show it, as OpenAI's does)."""

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop, self.text, self.sent, self.stopped = tuple(stop), "", "", False
        self.hold = max((len(s) for s in self.stop), default=1) - 1

    def add(self, text: str) -> str:
        """The part of the answer, ``text`` added, that is now safe to send."""
        if self.stopped:
            return ""
        self.text += text
        cuts = [self.text.find(s) for s in self.stop if s in self.text]
        if cuts:
            self.stopped, safe = True, self.text[: min(cuts)]
        else:
            safe = self.text[: max(0, len(self.text) - self.hold)]
        new, self.sent = safe[len(self.sent) :], safe
        return new


def _rest(final: str, sent: str) -> str:
    """What of ``final`` a stream that sent ``sent`` has still to send (nothing where it sent
    something else: a stage generated again after a failed batch)."""
    return final[len(sent) :] if final.startswith(sent) else ""


def _error_event(status: int, message: str) -> bytes:
    kind = ERROR_TYPES.get(status, "server_error")
    data = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    return f"data: {json.dumps(data)}\n\n".encode()


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
