"""What ``agon serve`` does with each request: read and check it, queue it, answer it whole or streamed.

:class:`Handlers` holds the served pair, its scheduler and its metrics; :mod:`~agon_env.serving.server`
routes requests to its methods. The JSON they send is :mod:`~agon_env.serving.wire`'s.

A streamed request's fate is decided before its first byte where it can be: the response starts
when the engine hands over the first piece of text, so a full queue is a real 503 with
``Retry-After``, a time-out before the first piece a real 504, and a failure before it a 500 — statuses
a client can retry on. Once the first byte is out the status line is sent: a later failure is an
error event (:func:`~agon_env.serving.wire.error_event`) that the ``openai`` client raises as an
``APIError``, and ``/metrics`` counts the request under the event's status.

A request body must be ``Content-Type: application/json`` (415 otherwise), at most
``max_body_bytes`` (413) and fully sent within ``body_timeout_s`` (408): a client that sends half a
body does not hold a connection open for ever.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from agon_env.seeding import derive_seed
from agon_env.serving import wire
from agon_env.serving.cascade import DRAFT, Cascade, CascadeAnswer, QuestionError, Stage
from agon_env.serving.metrics import CONTENT_TYPE, Metrics
from agon_env.serving.requests import ChatRequest, RequestError, parse_chat
from agon_env.serving.scheduling import CASCADE_MODEL, Batcher, Listen, QueueFull

CLIENT_GONE = 499
"""The status ``/metrics`` counts for a streamed request whose client left before its first byte
(nginx's "client closed request": the client saw no status)."""
UNKNOWN_MODEL = "unknown"
"""The ``model_name`` label of a request whose body names no served model (or a path with none)."""


class Handlers:
    """The routes' work, over one pair (``cascade``) and its scheduler (``batcher``)."""

    def __init__(
        self,
        cascade: Cascade,
        batcher: Batcher,
        metrics: Metrics,
        *,
        timeout_s: float,
        served_name: str | None,
        max_body_bytes: int,
        body_timeout_s: float,
    ) -> None:
        self.cascade, self.batcher, self.metrics, self.timeout_s = cascade, batcher, metrics, timeout_s
        self.max_body_bytes, self.body_timeout_s = max_body_bytes, body_timeout_s
        self.adapters = {f"{served_name or cascade.label}/{name}": name for name in cascade.agents}
        self.models = [CASCADE_MODEL, *self.adapters]
        self.created = int(time.time())
        self.root = getattr(cascade, "seed", 0)  # ``agon serve --seed``: seeds requests that bring none

    async def models_route(self, http: Request) -> JSONResponse:
        data = [
            {"id": m, "object": "model", "created": self.created, "owned_by": "agon"} for m in self.models
        ]
        return JSONResponse({"object": "list", "data": data})

    async def health(self, http: Request) -> JSONResponse:
        sizes = self.batcher.batches
        return JSONResponse(
            {
                "status": "ok",
                "engine": self.cascade.engine,
                "batches": sum(sizes.values()),
                "requests": self.batcher.requests,
                "largest_batch": max(sizes, default=0),
                "queue_depth": self.batcher.pending,
                "engine_counts": self.batcher.engine_counts(),
            }
        )

    async def metrics_route(self, http: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    async def http_error(self, http: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        if status == 404:
            return wire.error(404, f"no route {http.url.path}; the API is at /v1", code="not_found")
        if status == 405:
            return wire.error(
                405, f"{http.method} is not allowed on {http.url.path}", code="method_not_allowed"
            )
        return wire.error(status, str(getattr(exc, "detail", "")) or "error")

    async def server_error(self, http: Request, exc: Exception) -> Response:
        return wire.error(500, f"internal error: {type(exc).__name__}")

    # -- chat ----------------------------------------------------------------------------

    async def chat(self, http: Request) -> Response:
        t0 = time.perf_counter()
        try:
            request = self.parse(await self.read_body(http), http)
            if request.stream:
                return await self.stream(request, http, t0)
            results = await asyncio.gather(*(self.answer(request, s) for s in seeds(request, self.root)))
            rid = f"chatcmpl-{uuid.uuid4().hex}"
            body = wire.reply(request, rid, int(time.time()), results, self.decode)
            counts = body["usage"]
            self.metrics.tokens(request.model, counts["prompt_tokens"], counts["completion_tokens"])
            self.metrics.e2e(request.model, time.perf_counter() - t0)
            return JSONResponse(body)
        except RequestError as exc:
            return wire.error(exc.status, str(exc), code=exc.code, param=exc.param)
        except QueueFull as exc:
            headers = {"Retry-After": str(wire.RETRY_AFTER_S)}
            return wire.error(503, f"the server is busy: {exc}; retry", headers=headers)
        except asyncio.TimeoutError:
            return wire.error(504, f"no answer within the request time-out of {self.timeout_s:g} s")
        except Exception as exc:  # a defect, not the request's fault: 500, and the server goes on
            return wire.error(500, f"generation failed: {type(exc).__name__}: {exc}")

    def decode(self, token: int) -> str:
        """One token's text (``logprobs``), as the run's tokenizer writes it."""
        return str(self.cascade.base.tokenizer.decode([token]))

    async def read_body(self, http: Request) -> bytes:
        """The body, refused when it is not JSON by its type, too large, or sent too slowly."""
        kind = http.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise RequestError(
                f"the body must be Content-Type: application/json, got {kind or 'none'!r}", status=415
            )
        length = http.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            raise RequestError(self._too_large(), status=413)

        async def read() -> bytes:
            body = bytearray()
            async for part in http.stream():
                body += part
                if len(body) > self.max_body_bytes:  # no Content-Length (chunked), or a wrong one
                    raise RequestError(self._too_large(), status=413)
            return bytes(body)

        try:
            return await asyncio.wait_for(read(), self.body_timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(
                f"the body was not received within {self.body_timeout_s:g} s", status=408
            ) from None

    def _too_large(self) -> str:
        return f"the body is larger than the server's limit of {self.max_body_bytes} bytes"

    def parse(self, raw: bytes, http: Request) -> ChatRequest:
        """The checked request; ``http.state.model`` names its model for ``/metrics`` as soon as the
        body names a served one (a 400 on a known model is that model's)."""
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
            raise RequestError("the request body is not valid JSON") from None
        if isinstance(body, dict) and body.get("model") in self.models:
            http.state.model = body["model"]
        request = parse_chat(body, self.models)
        sampling = dict(request.sampling)
        if request.stop:
            sampling["stop"] = request.stop
        try:
            adapter = None if request.model == CASCADE_MODEL else self.adapters[request.model]
            self.cascade.check(request.question, adapter, sampling.get("max_new_tokens"))
        except QuestionError as exc:
            window = "window" in str(exc)
            code = "context_length_exceeded" if window else None
            raise RequestError(str(exc), "messages", code=code) from None
        return request.with_sampling(sampling)

    async def answer(self, request: ChatRequest, seed: int, listen: Listen | None = None) -> Any:
        return await asyncio.wait_for(
            self.batcher.submit(request.model, request.question, request.sampling, seed, listen),
            self.timeout_s,
        )

    async def stream(self, request: ChatRequest, http: Request, t0: float) -> Response:
        """Server-sent chunks as the engine generates: the role, then for ``cascade`` the draft as
        ``reasoning_content`` and then the answer as ``content``, token by token, the finish reason,
        the usage chunk when ``stream_options.include_usage`` asks for it, then ``[DONE]``.

        Nothing is sent until the first piece of text (or the whole answer) is in: a refusal or a
        failure before then raises here, and :meth:`chat` answers it with its own status."""
        pieces: asyncio.Queue[tuple[str, str, float]] = asyncio.Queue()

        def heard(stage: str, text: str) -> None:
            pieces.put_nowait((stage, text, time.perf_counter()))

        task = asyncio.ensure_future(self.answer(request, seeds(request, self.root)[0], heard))
        first = asyncio.ensure_future(pieces.get())
        # Until the response starts nobody else listens for the client: a client that leaves while
        # its request waits is seen here, and its request given up (as a stream's is once started).
        gone = asyncio.ensure_future(disconnected(http))
        try:
            await asyncio.wait({task, first, gone}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the handler itself was cancelled
            for future in (task, first, gone):
                future.cancel()
            raise
        left = gone.done()
        gone.cancel()
        if left:  # the client went away before a byte was sent: give the request up
            task.cancel()
            first.cancel()
            await asyncio.wait({task})  # its job leaves the queue (and is aborted) before we return
            http.state.status = CLIENT_GONE
            return Response(status_code=CLIENT_GONE)  # nobody reads it
        head = None
        if first.done():
            head = first.result()
        else:
            first.cancel()
            if (exc := task.exception()) is not None:
                raise exc  # nothing is sent yet: chat() answers with the failure's own status
        return StreamingResponse(
            self.events(request, http, t0, task, pieces, head), media_type="text/event-stream"
        )

    async def events(
        self,
        request: ChatRequest,
        http: Request,
        t0: float,
        task: asyncio.Future[Any],
        pieces: asyncio.Queue[tuple[str, str, float]],
        head: tuple[str, str, float] | None,
    ) -> AsyncIterator[bytes]:
        rid, made, model = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), request.model

        def chunk(delta: Mapping[str, Any], finish: str | None = None, scores: Any = None) -> bytes:
            return wire.chunk(rid, made, model, delta, finish, scores)

        reasoning, content, last = "", Held(request.stop, request.keep_stop), None
        try:
            yield chunk({"role": "assistant", "content": ""})
            while head is not None or not task.done() or not pieces.empty():
                if head is not None:
                    (stage, text, at), head = head, None
                elif pieces.empty():
                    got = asyncio.ensure_future(pieces.get())
                    await asyncio.wait({task, got}, return_when=asyncio.FIRST_COMPLETED)
                    if not got.done():
                        got.cancel()
                        continue
                    stage, text, at = got.result()
                else:
                    stage, text, at = pieces.get_nowait()
                if last is None:
                    self.metrics.first_token(model, at - t0)
                else:
                    self.metrics.inter_token(model, at - last)
                last = at
                if stage == DRAFT:
                    reasoning += text
                    yield chunk({"reasoning_content": text})
                elif new := content.add(text):
                    yield chunk({"content": new})
            try:
                result = await task
            except Exception as exc:  # the stream has begun: the error is an event, as vLLM sends it
                status, message = failure(exc, self.timeout_s)
                http.state.status = status
                yield wire.error_event(status, message)
                return
            text, reason = wire.final(result, request.stop, request.keep_stop)
            if isinstance(result, CascadeAnswer) and (more := rest(result.draft.completion, reasoning)):
                yield chunk({"reasoning_content": more})  # what a streaming engine held back
            if more := rest(text, content.sent):
                yield chunk({"content": more})
            # The engines stream text, not tokens: the log-probs come whole, with the finish reason
            # (a client that joins the chunks' lists holds what the unstreamed reply carries).
            alone = request.logprobs and isinstance(result, Stage)
            yield chunk({}, reason, wire.logprobs(result, self.decode) if alone else None)
            counts = wire.usage(wire.stages(result))
            self.metrics.tokens(model, counts["prompt_tokens"], counts["completion_tokens"])
            self.metrics.e2e(model, time.perf_counter() - t0)
            if request.include_usage:
                yield wire.usage_chunk(rid, made, model, counts)
        finally:
            if not task.done():  # the client went away: give the request up
                task.cancel()
            yield wire.DONE


async def disconnected(http: Request) -> None:
    """Returns when the client has gone (its body is read: what comes next is the disconnect)."""
    try:
        while (await http.receive())["type"] != "http.disconnect":
            pass
    except Exception:  # a transport that cannot tell: the client is never taken for gone
        await asyncio.Event().wait()


def failure(exc: BaseException, timeout_s: float) -> tuple[int, str]:
    """The status and message of a request that failed after its stream began."""
    if isinstance(exc, QueueFull):
        return 503, f"the server is busy: {exc}; retry"
    if isinstance(exc, asyncio.TimeoutError):
        return 504, f"no answer within the request time-out of {timeout_s:g} s"
    return 500, f"generation failed: {type(exc).__name__}: {exc}"


def seeds(request: ChatRequest, root: int) -> list[int]:
    """One seed per choice: the request's, else ``root`` (``agon serve --seed``), choice ``i``
    derived from it (a question's answer depends on the seed and the question only)."""
    seed = root if request.seed is None else request.seed
    return [seed if i == 0 else derive_seed(seed, "choice", i) for i in range(request.n)]


class Held:
    """The answer's streamed text, held back where it may be the start of a request's stop string
    (the reply ends at a stop string, as the whole one does: before it, or after it with
    ``keep_stop``)."""

    def __init__(self, stop: Sequence[str], keep_stop: bool = False) -> None:
        self.stop, self.keep, self.text, self.sent, self.stopped = tuple(stop), keep_stop, "", "", False
        self.hold = max((len(s) for s in self.stop), default=1) - 1

    def add(self, text: str) -> str:
        """The part of the answer, ``text`` added, that is now safe to send."""
        if self.stopped:
            return ""
        self.text += text
        cuts = [(self.text.find(s), s) for s in self.stop if s in self.text]
        if cuts:
            at, found = min(cuts)
            self.stopped, safe = True, self.text[: at + (len(found) if self.keep else 0)]
        else:
            safe = self.text[: max(0, len(self.text) - self.hold)]
        new, self.sent = safe[len(self.sent) :], safe
        return new


def rest(whole: str, sent: str) -> str:
    """What of ``whole`` a stream that sent ``sent`` has still to send (nothing where it sent
    something else: a stage generated again after a failed batch)."""
    return whole[len(sent) :] if whole.startswith(sent) else ""
