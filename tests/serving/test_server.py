"""`agon serve` as a real server process on 127.0.0.1, called with the official openai client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

KEY = "test-key"
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run: Path, *extra: str, env: dict | None = None, python: str = sys.executable):
    """``agon serve RUN`` in a child process; returns (process, base url) once /health answers."""
    port = free_port()
    cmd = [python, "-m", "agon_env.cli", "serve", str(run), "--port", str(port), "--log-level", "warning"]
    environ = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})}
    # Its own session: stop_server ends the whole group (a vLLM engine runs in child processes).
    proc = subprocess.Popen(
        [*cmd, *extra], env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600
    while time.time() < deadline:
        if proc.poll() is not None:
            stop_server(proc)
            raise RuntimeError(f"agon serve exited {proc.returncode}: {proc.stdout.read().decode()[-8000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError("agon serve did not come up")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM (uvicorn shuts down, the engine with it), then SIGKILL whatever is left of the group."""
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tiny_run):
    proc, url = start_server(tiny_run, env={"AGON_API_KEY": KEY})
    yield url
    stop_server(proc)


def client(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def ask(model: str, text: str = "What is 2 + 3?") -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


def test_models_and_one_cascade_reply(server):
    c = client(server)
    assert [m.id for m in c.models.list()] == ["cascade", "tiny-agon/agent_a", "tiny-agon/agent_b"]
    reply = c.chat.completions.create(**ask("cascade"))
    extra = reply.model_extra["agon"]
    assert extra["draft"]["adapter"] == "agent_b" and extra["challenge"]["adapter"] == "agent_a"
    assert extra["challenger_text"].startswith("What is 2 + 3?")
    assert reply.choices[0].message.content == extra["challenge"]["completion"]
    stages = extra["draft"]["completion_tokens"] + extra["challenge"]["completion_tokens"]
    assert reply.usage.completion_tokens == stages
    alone = c.chat.completions.create(**ask("tiny-agon/agent_a"))
    assert alone.choices[0].message.content and "agon" not in (alone.model_extra or {})


def test_bad_requests_get_a_json_4xx(server):
    with pytest.raises(openai.AuthenticationError):
        client(server, key="wrong").models.list()
    with pytest.raises(openai.NotFoundError, match="unknown model"):
        client(server).chat.completions.create(**ask("gpt-4"))
    with pytest.raises(openai.BadRequestError, match="user message"):
        client(server).chat.completions.create(model="cascade", messages=[])
    with pytest.raises(openai.BadRequestError, match="window of 2048 tokens"):
        client(server).chat.completions.create(**ask("cascade", "What is " + "1 + " * 2000 + "1?"))
    raw = httpx.post(
        f"{server}/v1/chat/completions",
        content=b'{"model": "cascade", "messages": [',
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    assert raw.status_code == 400 and "not valid JSON" in raw.json()["error"]["message"]
    # JSON nested past the parser's depth, and a text part whose text is no string: 400s too
    for body, said in [
        (b"[" * 100_000, "not valid JSON"),
        (
            b'{"model": "cascade", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
            "user message",
        ),
    ]:
        auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        raw = httpx.post(f"{server}/v1/chat/completions", content=body, headers=auth)
        assert raw.status_code == 400 and said in raw.json()["error"]["message"]


def test_a_burst_of_32_is_batched_and_a_malformed_request_disturbs_none(server):
    async def burst():
        c = openai.AsyncOpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0, timeout=600)
        models = ["cascade", "tiny-agon/agent_a", "tiny-agon/agent_b"]
        calls = [c.chat.completions.create(**ask(models[i % 3], f"What is {i} + 1?")) for i in range(32)]
        async with httpx.AsyncClient(timeout=600) as h:
            bad = h.post(
                f"{server}/v1/chat/completions",
                content=b"{not json",
                headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
            )
            return await asyncio.gather(*calls[:16], bad, *calls[16:], return_exceptions=True)

    before = httpx.get(f"{server}/health").json()
    results = asyncio.run(burst())
    bad = results.pop(16)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert all(not isinstance(r, Exception) for r in results), [
        r for r in results if isinstance(r, Exception)
    ]
    for i, r in enumerate(results):
        assert f"What is {i} + 1?" in (
            r.model_extra.get("agon", {}).get("challenger_text", f"What is {i} + 1?")
        )
        assert r.choices[0].message.role == "assistant"
    after = httpx.get(f"{server}/health").json()
    assert after["requests"] - before["requests"] == 32
    assert after["batches"] - before["batches"] < 32 and after["largest_batch"] > 1  # batched, not serialised
    counts, was = after["engine_counts"], before["engine_counts"]  # the HF engine's own, over the burst
    assert counts["prefills"] - was["prefills"] == after["batches"] - before["batches"]
    assert counts["steps"] > was["steps"] and counts["seconds_forward"] > was["seconds_forward"]


def test_the_openai_client_streams_the_draft_then_the_answer(server):
    chunks = list(
        client(server).chat.completions.create(
            **ask("cascade"), stream=True, stream_options={"include_usage": True}, max_tokens=4, seed=2
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    draft = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    answer = "".join(d.content or "" for d in deltas)
    whole = client(server).chat.completions.create(**ask("cascade"), max_tokens=4, seed=2)
    assert draft == whole.model_extra["agon"]["draft"]["completion"]
    assert answer == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert whole.model_extra["agon"]["challenge"]["completion_tokens"] <= 4
