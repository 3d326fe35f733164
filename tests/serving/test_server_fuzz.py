"""A thousand and more mutated requests through the app in-process: none reaches a 500, every error is
OpenAI-shaped JSON, and the server answers a plain request afterwards.

Generation is a stand-in (answers instantly) so the fuzz stays within seconds; the request checks,
the run's env and tokenizer (``Cascade.check``, where a lone surrogate once raised a TypeError) are
the tiny run's own."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from agon_env.serving.cascade import CascadeAnswer, Stage
from agon_env.serving.server import build_app

KEY = "fuzz"
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
ROUNDS = 1200


class Instant:
    """The tiny run's cascade for its checks; every answer is made up at once."""

    def __init__(self, real) -> None:
        self.real, self.label, self.agents, self.seed, self.engine = real, "pair", real.agents, 0, "fake"
        self.direction = real.direction

    def check(self, *args, **kwargs) -> None:
        self.real.check(*args, **kwargs)

    def close(self) -> None:
        pass

    def _stage(self, name: str, sampling) -> Stage:
        n = (sampling or {}).get("max_new_tokens", 4)
        return Stage(name, "x " * n, 10, n, 0.0, "length", None, None)

    def alone_many(self, adapter, questions, *, sampling=None, seeds=None, stream=None):
        return [self._stage(adapter, sampling) for _ in questions]

    def answer_many(self, questions, *, sampling=None, seeds=None, stream=None):
        for i in range(len(questions)) if stream is not None else ():
            stream(i, "draft", "draft")
        draft, answer = self._stage(self.direction[0], None), self._stage(self.direction[1], sampling)
        return [CascadeAnswer(q, draft, "draft", q, answer) for q in questions]


VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2,
    7,
    9,
    -5,
    2**70,
    -(2**70),
    0.5,
    -0.0,
    1e308,
    1.5,
    "",
    "x",
    "\ud800",
    "hot",
    [],
    [1],
    ["a"],
    ["a", "b", "c", "d", "e"],
    {},
    {"include_usage": 1},
    {"include_usage": True},
    [{"role": "user"}],
    [{"role": "user", "content": None}],
    [{"role": "user", "content": [{"type": "text"}]}],
    [{"role": "user", "content": "\udfff\ud800"}],
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]}],
]
FIELDS = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "n",
    "stream",
    "stream_options",
    "logprobs",
    "tools",
    "presence_penalty",
    "frequency_penalty",
    "user",
]
RAW = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b'"\\ud800"', b"[" * 3000, b"{", b"\x00", b"\xff\xfe"]


def mutated(rng: random.Random) -> tuple[str, str, bytes]:
    """(method, path, body): a valid request changed one to three ways, or its bytes garbled."""
    body = {"model": rng.choice(["cascade", "pair/agent_a", "pair/agent_b"])}
    body["messages"] = [{"role": "user", "content": "What is 2 + 3?"}]
    for _ in range(rng.randint(1, 3)):
        field = rng.choice(FIELDS)
        if rng.random() < 0.15:
            body.pop(field, None)
        else:
            body[field] = rng.choice(VALUES)
    raw = json.dumps(body).encode("utf-8", "surrogatepass")
    roll = rng.random()
    if roll < 0.15:  # a raw token where a value was
        field = rng.choice(FIELDS).encode()
        raw = (
            json.dumps({k: 0 for k in body})
            .encode()
            .replace(b'"%s": 0' % field, b'"%s": %s' % (field, rng.choice(RAW)))
        )
    elif roll < 0.3:  # garbled bytes
        data = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        raw = bytes(data)
    elif roll < 0.35:
        raw = raw[: rng.randrange(len(raw))]
    method, path = "POST", "/v1/chat/completions"
    if rng.random() < 0.05:
        method, path = rng.choice([("GET", path), ("PUT", path), ("POST", "/v1/models"), ("GET", "/v1/x")])
    return method, path, raw


def test_a_thousand_mutated_requests_reach_no_500(cascade):
    rng = random.Random(0)
    seen: dict[int, int] = {}
    app = build_app(Instant(cascade), api_key=KEY)
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(ROUNDS):
            method, path, raw = mutated(rng)
            got = client.request(method, path, content=raw, headers=AUTH)
            seen[got.status_code] = seen.get(got.status_code, 0) + 1
            assert got.status_code < 500, (raw[:300], got.text[:300])
            if got.status_code >= 400:
                assert set(got.json()["error"]) == {"message", "type", "param", "code"}, got.text
            elif got.headers["content-type"].startswith("text/event-stream"):
                assert got.text.rstrip().endswith("data: [DONE]")
            else:
                assert got.json()["choices"][0]["message"]["role"] == "assistant"
        ok = client.post(
            "/v1/chat/completions",
            json={"model": "cascade", "messages": [{"role": "user", "content": "What is 1 + 1?"}]},
            headers=AUTH,
        )
        assert ok.status_code == 200
    assert seen.get(200, 0) > 50 and seen.get(400, 0) > 300, seen  # both kinds were exercised
