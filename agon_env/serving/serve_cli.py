"""``agon serve RUN``: the run's pair behind an OpenAI-compatible API (:mod:`agon_env.serving.server`).

Binds 127.0.0.1 unless ``--host`` says otherwise, and checks ``--api-key`` (or ``$AGON_API_KEY``)
as ``Authorization: Bearer KEY``, as ``vllm serve --api-key`` does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from agon_env.command import run_command
from agon_env.serving.answer_cli import PairArgs

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
    """How long the first request of a batch waits for others to join it."""
    max_batch: int = 32
    """Most requests answered by one batched call."""
    log_level: str = "info"
    """uvicorn's log level (``warning`` for quiet)."""


def run(args: ServeArgs) -> int:
    import uvicorn

    from agon_env.serving.server import build_app

    cascade = args.cascade()
    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    app = build_app(cascade, api_key=key, window_s=args.batch_window_ms / 1000, max_batch=args.max_batch)
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
