"""The server's wire contract without a model: streamed refusals with their real status (the official
``openai`` client against the app), body rules (415, 413, 408), unknown fields and earlier turns
refused by name, and ``/metrics`` counting every request under the status its client saw."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("openai")

import httpx
import openai

from agon_env.agents.aborting import Aborted, current
from agon_env.serving.cascade import ANSWER, Stage
from agon_env.serving.server import build_app

KEY = "k"
MODEL = "fake/agent_a"


class Fake:
    """A stand-in pair: each call sleeps ``seconds``, streams ``pieces`` one by one (``gap`` apart),
    then answers, or raises ``fail`` after the pieces."""

    label, agents, seed, engine, direction = "fake", {"agent_a": None}, 0, "fake", ("agent_a", "agent_a")

    def __init__(self, seconds: float = 0.0, pieces: int = 3, gap: float = 0.0, fail: bool = False) -> None:
        self.seconds, self.pieces, self.gap, self.fail = seconds, pieces, gap, fail

    def check(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def alone_many(self, adapter, questions, *, sampling=None, seeds=None, stream=None):
        # Like the engine, a given-up call ends at its next step (here: every 10 ms of its wait).
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            if (abort := current()) is not None and abort.is_set:
                raise Aborted("given up")
            time.sleep(0.01)
        for _ in range(self.pieces if stream is not None else 0):
            for i in range(len(questions)):
                stream(i, ANSWER, "ab ")
            time.sleep(self.gap)
        if self.fail:
            raise RuntimeError("the engine broke")
        return [
            Stage(adapter, "ab " * self.pieces, 7, self.pieces, 0.0, "stop", None, None) for _ in questions
        ]


def run_app(app, go):
    """``go(client, openai_client)`` against ``app`` in-process, its scheduler started."""

    async def main():
        await app.state.batcher.start()
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                oai = openai.AsyncOpenAI(base_url="http://t/v1", api_key=KEY, max_retries=0, http_client=c)
                return await go(c, oai)
        finally:
            await app.state.batcher.stop()

    return asyncio.run(main())


def ask(**fields) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}


def counted(app, model: str, status: int) -> int:
    text = app.state.metrics.render()
    found = re.search(
        rf'agon:requests_total{{model_name="{re.escape(model)}",status="{status}"}} (\S+)', text
    )
    return int(float(found.group(1))) if found else 0


def test_a_streamed_request_refused_by_a_full_queue_is_a_503_with_retry_after_before_any_byte():
    app = build_app(Fake(0.3), api_key=KEY, max_queue=1, window_s=0.01)

    async def go(c, oai):
        async def streamed():
            try:
                chunks = [x async for x in await oai.chat.completions.create(**ask(), stream=True)]
                return chunks
            except openai.APIStatusError as exc:
                return exc

        return await asyncio.gather(streamed(), streamed())

    got = run_app(app, go)
    refused = [g for g in got if isinstance(g, openai.APIStatusError)]
    assert len(refused) == 1 and refused[0].status_code == 503
    assert refused[0].response.headers["Retry-After"] == "1"  # the client's retry honours it
    served = next(g for g in got if isinstance(g, list))
    assert "".join(c.choices[0].delta.content or "" for c in served if c.choices) == "ab ab ab "
    assert counted(app, MODEL, 503) == 1 and counted(app, MODEL, 200) == 1


def test_a_streamed_request_whose_time_out_falls_before_its_first_piece_is_a_504():
    app = build_app(Fake(0.5), api_key=KEY, timeout_s=0.1)

    async def go(c, oai):
        with pytest.raises(openai.APIStatusError) as caught:
            await oai.chat.completions.create(**ask(), stream=True)
        return caught.value

    exc = run_app(app, go)
    assert exc.status_code == 504 and "time-out" in exc.message
    assert counted(app, MODEL, 504) == 1


def test_a_failure_after_the_first_byte_is_an_error_event_the_openai_client_raises():
    app = build_app(Fake(pieces=2, fail=True), api_key=KEY)

    async def go(c, oai):
        seen = []
        with pytest.raises(openai.APIError) as caught:
            async for x in await oai.chat.completions.create(**ask(), stream=True):
                seen.append(x)
        return seen, caught.value

    seen, exc = run_app(app, go)
    assert seen and "the engine broke" in exc.message and exc.body["code"] == "500"
    assert counted(app, MODEL, 500) == 1 and counted(app, MODEL, 200) == 0


@pytest.mark.parametrize(
    ("kind", "raw", "status", "said"),
    [
        ("text/plain", b'{"model": "fake/agent_a"}', 415, "application/json"),
        (None, b'{"model": "fake/agent_a"}', 415, "application/json"),
        ("application/json", b"{" + b" " * 2048 + b"}", 413, "limit of 1024 bytes"),
    ],
)
def test_a_body_must_be_json_by_type_and_within_the_size_limit(kind, raw, status, said):
    app = build_app(Fake(), api_key=KEY, max_body_bytes=1024)
    headers = {"Authorization": f"Bearer {KEY}", **({"Content-Type": kind} if kind else {})}

    async def go(c, oai):
        return await c.post("/v1/chat/completions", content=raw, headers=headers)

    got = run_app(app, go)
    assert got.status_code == status and said in got.json()["error"]["message"]


def test_a_chunked_body_past_the_limit_and_a_half_sent_body_are_refused():
    app = build_app(Fake(), api_key=KEY, max_body_bytes=1024, body_timeout_s=0.2)
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}

    async def endless():  # no Content-Length: the limit is counted as the body arrives
        while True:
            yield b" " * 512

    async def stalled():
        yield b'{"model": '
        await asyncio.sleep(5)
        yield b'"fake/agent_a"}'

    async def go(c, oai):
        big = await c.post("/v1/chat/completions", content=endless(), headers=headers)
        t0 = time.perf_counter()
        slow = await c.post("/v1/chat/completions", content=stalled(), headers=headers)
        return big, slow, time.perf_counter() - t0

    big, slow, seconds = run_app(app, go)
    assert big.status_code == 413
    assert slow.status_code == 408 and seconds < 2


@pytest.mark.parametrize(
    ("fields", "param", "said"),
    [
        ({"guided_json": {}}, "guided_json", "unknown field"),
        ({"temprature": 0.5}, "temprature", "unknown field"),
        ({"min_p": 1.5}, "min_p", "between 0 and 1"),
        ({"repetition_penalty": 0}, "repetition_penalty", "above 0"),
        ({"ignore_eos": "yes"}, "ignore_eos", "true or false"),
        ({"stop_token_ids": [-1]}, "stop_token_ids", "token ids"),
        ({"min_tokens": 5, "max_tokens": 3}, "min_tokens", "between 0 and 3"),
        ({"frequency_penalty": 0.5}, "frequency_penalty", "other than 0"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "between 0 and 20"),
        ({"top_logprobs": 1}, "top_logprobs", "needs logprobs"),
        ({"top_k": -2}, "top_k", "between -1"),
        ({"include_stop_str_in_output": "yes"}, "include_stop_str_in_output", "true or false"),
        (
            {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]},
            "messages",
            "system",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "2"},
                    {"role": "user", "content": "hi"},
                ]
            },
            "messages",
            "assistant",
        ),
    ],
)
def test_unknown_fields_unsupported_values_and_earlier_turns_are_a_400_naming_them(fields, param, said):
    app = build_app(Fake(), api_key=KEY)

    async def go(c, oai):
        with pytest.raises(openai.BadRequestError) as caught:
            body = {**ask(), **fields}  # vLLM's fields and typos are what ``extra_body`` sends
            extra = {k: v for k, v in body.items() if k not in ("model", "messages")}
            await oai.chat.completions.create(model=MODEL, messages=body["messages"], extra_body=extra)
        return caught.value

    exc = run_app(app, go)
    assert exc.body["param"] == param and said in exc.body["message"]
    assert counted(app, MODEL, 400) == 1  # a 400 on a known model is that model's


def test_vllms_sampling_fields_reach_the_answering_stages_sampling():
    seen = []

    class Recording(Fake):
        def alone_many(self, adapter, questions, *, sampling=None, seeds=None, stream=None):
            seen.append(dict(sampling or {}))
            return super().alone_many(adapter, questions, sampling=sampling, seeds=seeds, stream=stream)

    app = build_app(Recording(), api_key=KEY)
    fields = {"min_p": 0.2, "repetition_penalty": 1.3, "min_tokens": 2, "ignore_eos": True}
    fields |= {"stop_token_ids": [7, 7, 9], "top_k": -1, "user": "u1"}

    async def go(c, oai):
        auth = {"Authorization": f"Bearer {KEY}"}
        return await c.post("/v1/chat/completions", json=ask(**fields), headers=auth)

    assert run_app(app, go).status_code == 200
    assert seen == [
        {"min_p": 0.2, "repetition_penalty": 1.3, "min_tokens": 2, "ignore_eos": True}
        | {"stop_token_ids": (7, 9), "top_k": 0}
    ]


def test_metrics_count_every_status_a_client_saw_with_vllms_names():
    app = build_app(Fake(pieces=4, gap=0.01), api_key=KEY)
    auth = {"Authorization": f"Bearer {KEY}"}

    async def go(c, oai):
        await c.get("/v1/models")  # 401
        await c.get("/nope", headers=auth)  # 404
        await c.delete("/v1/models", headers=auth)  # 405
        await c.post("/v1/chat/completions", json=ask(model="nobody"), headers=auth)  # 404, unknown model
        await c.post("/v1/chat/completions", json=ask(max_tokens=-1), headers=auth)  # 400 on a known model
        [x async for x in await oai.chat.completions.create(**ask(), stream=True)]
        await c.get("/health")
        return (await c.get("/metrics")).text

    text = run_app(app, go)
    for model, status in [("unknown", 401), ("unknown", 404), ("unknown", 405), (MODEL, 400), (MODEL, 200)]:
        assert counted(app, model, status) >= 1, (model, status)
    assert counted(app, "unknown", 404) == 2 and counted(app, "unknown", 200) == 0  # /health, /metrics not
    model = f'{{model_name="{MODEL}"}}'
    assert f"agon:prompt_tokens_total{model} 7" in text and f"agon:generation_tokens_total{model} 4" in text
    for name, count in [
        ("time_to_first_token_seconds", 1),
        ("inter_token_latency_seconds", 3),
        ("e2e_request_latency_seconds", 1),
        ("request_queue_time_seconds", 1),
    ]:
        assert f"# TYPE agon:{name} histogram" in text
        assert f"agon:{name}_count{model} {count}" in text, name
    assert "agon:num_requests_running 0" in text and "agon:num_requests_waiting 0" in text


def test_a_streamed_request_whose_client_leaves_before_its_first_byte_is_given_up():
    app = build_app(Fake(seconds=2.0), api_key=KEY)
    body = json.dumps(ask(stream=True)).encode()
    headers = [(b"authorization", f"Bearer {KEY}".encode()), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}
    scope |= {"http_version": "1.1", "scheme": "http", "query_string": b"", "root_path": ""}
    sent: list[dict] = []

    async def main():
        await app.state.batcher.start()
        try:
            messages = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive():
                if messages:
                    return messages.pop(0)
                await asyncio.sleep(0.2)  # the client hangs up while its request waits
                return {"type": "http.disconnect"}

            async def send(message):
                sent.append(message)

            t0 = time.perf_counter()
            await app(scope, receive, send)
            seconds = time.perf_counter() - t0
            # The queue depth counts the request until its call ends: at the engine's next step.
            for _ in range(50):
                if app.state.batcher.pending == 0:
                    break
                await asyncio.sleep(0.02)
            return seconds, app.state.batcher.pending
        finally:
            await app.state.batcher.stop()

    seconds, pending = asyncio.run(main())
    assert seconds < 1.5 and pending == 0  # not held until the engine's first piece (2 s)
    assert counted(app, MODEL, 499) == 1 and counted(app, MODEL, 200) == 0
