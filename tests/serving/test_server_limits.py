"""What keeps a server safe and responsive: a bounded queue (503 + Retry-After), a request time-out
(504), and ``agon serve``'s refusals before any model loads (an open host without a key)."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")

import httpx

from agon_env.cli import main
from agon_env.serving.cascade import Stage
from agon_env.serving.server import build_app


class Slow:
    """A stand-in pair whose every batched call takes ``seconds``."""

    label, agents, seed, engine, direction = "slow", {"agent_a": None}, 0, "fake", ("agent_a", "agent_a")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def check(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def alone_many(self, adapter, questions, *, sampling=None, seeds=None):
        time.sleep(self.seconds)
        return [Stage(adapter, "ok", 1, 1, self.seconds, "stop", None, None) for _ in questions]


def burst(app, count: int) -> list:
    body = {"model": "slow/agent_a", "messages": [{"role": "user", "content": "hi"}]}

    async def go():
        await app.state.batcher.start()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await asyncio.gather(
                    *(c.post("/v1/chat/completions", json=body) for _ in range(count))
                )
        finally:
            await app.state.batcher.stop()

    return asyncio.run(go())


def test_a_full_queue_answers_503_with_retry_after_and_the_rest_are_served():
    got = burst(build_app(Slow(0.3), max_queue=2, window_s=0.05), 5)
    codes = sorted(r.status_code for r in got)
    assert codes == [200, 200, 503, 503, 503]
    busy = next(r for r in got if r.status_code == 503)
    assert busy.headers["Retry-After"] == "1" and busy.json()["error"]["type"] == "server_busy"


def test_a_request_past_its_time_out_gets_a_504():
    got = burst(build_app(Slow(0.5), timeout_s=0.1), 1)[0]
    assert got.status_code == 504 and "time-out" in got.json()["error"]["message"]


def test_an_open_host_without_a_key_is_refused_in_one_line(tiny_run, capsys, monkeypatch):
    monkeypatch.delenv("AGON_API_KEY", raising=False)
    assert main(["serve", str(tiny_run), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--host 0.0.0.0" in err and "--api-key" in err
    assert main(["serve", str(tiny_run), "--max-queue", "0"]) == 2
    assert "--max-queue" in capsys.readouterr().err


def test_threads_sets_torchs_threads(tiny_run, capsys):
    import torch

    before = torch.get_num_threads()
    try:
        assert main(["answer", str(tiny_run), "What is 2 + 3?", "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert main(["answer", str(tiny_run), "hi", "--threads", "-1"]) == 2
    assert "--threads -1" in capsys.readouterr().err


class Continuous(Slow):
    """A stand-in for vLLM's async engine (``continuous``): calls from several threads run at once,
    each as long as its ``max_tokens`` asks (a hundredth of a second a token)."""

    continuous = True

    def alone_many(self, adapter, questions, *, sampling=None, seeds=None):
        seconds = (sampling or {}).get("max_new_tokens", 1) / 100
        time.sleep(seconds)
        return [Stage(adapter, "ok", 1, 1, seconds, "stop", None, None) for _ in questions]


def test_on_a_continuous_engine_a_short_request_sent_during_a_long_one_finishes_first():
    app = build_app(Continuous(0), window_s=0.05)
    done: list[str] = []

    async def ask(name: str, tokens: int, after: float, c: httpx.AsyncClient) -> int:
        await asyncio.sleep(after)
        body = {"model": "slow/agent_a", "messages": [{"role": "user", "content": name}]}
        got = await c.post("/v1/chat/completions", json={**body, "max_tokens": tokens})
        done.append(name)
        return got.status_code

    async def go():
        await app.state.batcher.start()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await asyncio.gather(ask("long", 150, 0, c), ask("short", 5, 0.3, c))
        finally:
            await app.state.batcher.stop()

    assert asyncio.run(go()) == [200, 200]
    assert done == ["short", "long"]  # admitted at once, not after the long one's batch


def test_the_body_limits_are_flags_whose_defaults_are_the_apps(tiny_run, capsys):
    from agon_env.serving import server
    from agon_env.serving.commands.serve import ServeArgs

    assert (ServeArgs.max_body_bytes, ServeArgs.body_timeout_s) == (
        server.MAX_BODY_BYTES,
        server.BODY_TIMEOUT_S,
    )
    for flag in ("--max-body-bytes", "--body-timeout-s"):
        assert main(["serve", str(tiny_run), flag, "0"]) == 2
        assert flag in capsys.readouterr().err
