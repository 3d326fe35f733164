"""``agon serve``'s app: a run's pair behind an OpenAI-compatible API (an ASGI app, starlette).

=========================  ===================================================================
route                      what it does
=========================  ===================================================================
``GET /v1/models``         the models: ``cascade``, ``<name>/agent_a``, ``<name>/agent_b`` (``name``:
                           ``--served-model-name``, else the run folder's name)
``POST /v1/chat/completions``  the user message is the question. ``cascade``: the drafter
                           drafts, the challenger answers after reading the draft as the run's
                           channel shows it; the reply is the challenger's turn, and the draft
                           is in the extra field ``agon``; streamed, the draft comes first as
                           ``reasoning_content`` (as vLLM streams a reasoning model's thoughts)
                           and the answer as ``content``.
                           ``<name>/<adapter>``: that adapter alone (``agon eval``'s standalone)
``GET /health``            200 when the app is up (no key needed, as vLLM's), with how many
                           batches and requests it has run and its largest batch
``GET /metrics``           Prometheus text (:mod:`~agon_env.serving.metrics`; no key needed)
=========================  ===================================================================

This module is the routes and the app's assembly; what a request must hold is
:mod:`~agon_env.serving.requests`, what each route does :mod:`~agon_env.serving.handlers`, and the
JSON on the wire :mod:`~agon_env.serving.wire`.

Errors are JSON in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) on every
path and method: 401 without the API key (``Authorization: Bearer KEY``, checked as vLLM's
``--api-key`` checks it), 400 for a body that is not JSON, a field out of range or unknown, 404 for
an unknown model or path, 405 for a wrong method, 408/413/415 for a body sent too slowly, too large
or not JSON, 503 with ``Retry-After`` when the queue is full, 504 past the request time-out — a
streamed request too, when it is refused before its first byte. A refused request changes nothing
for the others, and an unexpected failure is a JSON 500, never a plain-text one.

Requests are scheduled by :mod:`~agon_env.serving.scheduling` (each sent at once; the HF engine and
vLLM's async engine batch them by decode step). At most ``max_queue`` requests wait or generate at
once; more are told to retry (503), not held.
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Route

from agon_env.serving import wire
from agon_env.serving.cascade import Cascade
from agon_env.serving.handlers import UNKNOWN_MODEL, Handlers
from agon_env.serving.metrics import Metrics
from agon_env.serving.scheduling import Batcher, Direct

MAX_BODY_BYTES = 1 << 20
"""Largest request body (1 MiB: a question fills a 4,096-token window in about 16 KiB of JSON)."""
BODY_TIMEOUT_S = 10.0
"""Longest a client may take to send its body."""
UNCOUNTED = ("/metrics", "/health")
"""Paths ``/metrics`` does not count (scrapes and probes; vLLM's ``http_requests_total`` leaves them out)."""


def build_app(
    cascade: Cascade,
    *,
    api_key: str | None = None,
    window_s: float = 0.01,
    max_batch: int = 32,
    max_queue: int = 256,
    timeout_s: float = 600.0,
    served_name: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> Starlette:
    """The ASGI app serving ``cascade`` (``uvicorn.run(build_app(...))``).

    ``max_queue``: most requests pending at once (more get a 503 with ``Retry-After``);
    ``timeout_s``: a request not answered by then gets a 504; ``served_name``: the prefix of the
    adapters' model ids (default: the run folder's name); ``max_body_bytes`` and
    ``body_timeout_s``: the largest body and the longest its sending may take."""
    batcher = (
        Direct(cascade, max_queue)
        if getattr(cascade, "continuous", False)
        else Batcher(cascade, window_s, max_batch, max_queue)
    )
    metrics = Metrics(lambda: batcher.running, lambda: max(0, batcher.pending - batcher.running))
    batcher.on_start = metrics.queued
    handlers = Handlers(
        cascade,
        batcher,
        metrics,
        timeout_s=timeout_s,
        served_name=served_name,
        max_body_bytes=max_body_bytes,
        body_timeout_s=body_timeout_s,
    )

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
            Route("/v1/models", handlers.models_route, methods=["GET"]),
            Route("/v1/chat/completions", handlers.chat, methods=["POST"]),
            Route("/health", handlers.health, methods=["GET"]),
            Route("/metrics", handlers.metrics_route, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: handlers.http_error, Exception: handlers.server_error},
    )
    app.state.batcher = batcher
    app.state.metrics = metrics
    if api_key:
        app.add_middleware(_KeyCheck, api_key=api_key)
    app.add_middleware(_Counted, metrics=metrics)  # outermost: it sees the 401s too
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
                await wire.error(401, "missing or wrong API key", code="invalid_api_key")(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


class _Counted:
    """Counts every HTTP request in ``/metrics`` under the status its client saw: the status line,
    unless a handler put another in ``state`` (an error event after a stream's first byte), and the
    model its body named (``state["model"]``; :data:`UNKNOWN_MODEL` for none)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in UNCOUNTED:
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        sent = {"status": 500}  # what a client sees of an app that fails before answering

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            status = state.get("status", sent["status"])
            self.metrics.request(state.get("model", UNKNOWN_MODEL), status)
