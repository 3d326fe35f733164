"""``agon serve RUN``: the run's pair behind an OpenAI-compatible API (:mod:`agon_env.serving.server`).

Binds 127.0.0.1 unless ``--host`` says otherwise, and checks ``--api-key`` (or ``$AGON_API_KEY``)
as ``Authorization: Bearer KEY``, as ``vllm serve --api-key`` does. A ``--host`` other than a
loopback address without a key is refused (``--allow-no-key`` serves it unauthenticated all the same).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass

from agon_env.command import run_command
from agon_env.serving.commands.answer import PairArgs
from agon_env.serving.errors import ServeError

API_KEY_ENV = "AGON_API_KEY"


@dataclass
class ServeArgs(PairArgs):
    """``agon serve``: models ``cascade``, ``<run>/agent_a`` and ``<run>/agent_b`` at ``/v1``."""

    host: str = "127.0.0.1"
    """Address to bind (``0.0.0.0`` exposes the server to the network: set an API key)."""
    port: int = 8000
    """Port to listen on."""
    api_key: str | None = None
    """Requests must send ``Authorization: Bearer KEY`` (None: ``$AGON_API_KEY``; unset: no check)."""
    batch_window_ms: float = 10.0
    """How long a request waits before it reaches the engine, so a burst's requests are prefilled
    together (the engine admits requests at every decode step either way)."""
    max_batch: int = 32
    """Most requests generating at once (the rest wait in the queue, counted in its depth)."""
    max_queue: int = 256
    """Most requests waiting or generating at once; more are answered 503 with ``Retry-After``."""
    request_timeout_s: float = 600.0
    """A request not answered by then gets a 504 (its work is dropped if it has not begun)."""
    max_body_bytes: int = 1 << 20
    """Largest request body in bytes (1 MiB, ``server.MAX_BODY_BYTES``; larger: 413)."""
    body_timeout_s: float = 10.0
    """Longest a client may take to send its request body (``server.BODY_TIMEOUT_S``; longer: 408)."""
    served_model_name: str | None = None
    """The prefix of the adapters' model ids (``NAME/agent_a``; None: the run folder's name)."""
    allow_no_key: bool = False
    """Serve a non-loopback ``--host`` without an API key (refused otherwise)."""
    log_level: str = "info"
    """uvicorn's log level (``warning`` for quiet)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


def check(args: ServeArgs, key: str | None) -> None:
    """Refuse, in one line, what would serve unsafely or not at all."""
    if not key and not args.allow_no_key and not is_loopback(args.host):
        raise ServeError(
            f"--host {args.host} exposes the server beyond this machine: set --api-key (or ${API_KEY_ENV}), "
            "or pass --allow-no-key to serve it unauthenticated"
        )
    if args.max_queue < 1 or args.max_batch < 1 or args.max_body_bytes < 1:
        raise ServeError("--max-queue, --max-batch and --max-body-bytes must be at least 1")
    if not (args.request_timeout_s > 0 and args.body_timeout_s > 0):
        raise ServeError("--request-timeout-s and --body-timeout-s must be above 0")


def run(args: ServeArgs) -> int:
    import uvicorn

    from agon_env.serving.server import build_app

    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    check(args, key)
    cascade = args.cascade(continuous=True)
    app = build_app(
        cascade,
        api_key=key,
        window_s=args.batch_window_ms / 1000,
        max_batch=args.max_batch,
        max_queue=args.max_queue,
        timeout_s=args.request_timeout_s,
        served_name=args.served_model_name,
        max_body_bytes=args.max_body_bytes,
        body_timeout_s=args.body_timeout_s,
    )
    drafter, challenger = cascade.direction
    print(
        f"agon serve: {args.run} ({drafter} drafts, {challenger} answers) on http://{args.host}:{args.port}/v1"
        f"{' (API key required)' if key else ''}",
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def main(argv: Sequence[str]) -> int:
    """``agon serve ARGV``."""
    return run_command(ServeArgs, argv, "agon serve", run)
