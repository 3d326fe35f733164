"""The chat API in-process (starlette's TestClient) on the tiny run: sampling fields honoured or refused
by name, ``usage`` exact, OpenAI-shaped errors on every path and method, streaming chunks, /metrics."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from agon_env.serving.server import build_app

KEY = "k"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def api(cascade):
    with TestClient(build_app(cascade, api_key=KEY, served_name="pair"), raise_server_exceptions=False) as c:
        yield c


def chat(api, **fields):
    body = {"model": "cascade", "messages": [{"role": "user", "content": "What is 2 + 3?"}], **fields}
    return api.post("/v1/chat/completions", json=body, headers=AUTH)


def content_tokens(cascade, text: str) -> int:
    return len(cascade.base.tokenizer(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_the_answer_budget_is_honoured_and_usage_is_exact(api, cascade, field):
    got = chat(api, temperature=0, **{field: 3}).json()
    extra = got["agon"]
    # the budget bounds the draft and the answer together: the draft spends first, the answer the rest
    assert extra["draft"]["completion_tokens"] + extra["challenge"]["completion_tokens"] == 3
    assert got["choices"][0]["finish_reason"] == "length"
    stages = (extra["draft"], extra["challenge"])
    assert got["usage"] == {
        "prompt_tokens": sum(s["prompt_tokens"] for s in stages),
        "completion_tokens": sum(s["completion_tokens"] for s in stages),
        "total_tokens": sum(s["prompt_tokens"] + s["completion_tokens"] for s in stages),
    }
    alone = api.post(
        "/v1/chat/completions",
        json={"model": "pair/agent_a", "messages": [{"role": "user", "content": "Hi"}], field: 2},
        headers=AUTH,
    ).json()
    assert alone["usage"]["completion_tokens"] == 2
    assert content_tokens(cascade, alone["choices"][0]["message"]["content"]) <= 2


def test_temperature_seed_and_n_change_the_answer_as_asked(api):
    def text(**f):
        return [c["message"]["content"] for c in chat(api, max_tokens=12, **f).json()["choices"]]

    assert text(temperature=1.5, seed=3) == text(temperature=1.5, seed=3)  # a seed reproduces
    hot = {t for s in range(6) for t in text(temperature=1.5, seed=s)}
    assert len(hot) > 1  # ... and different seeds differ (the run's own sampling is greedy)
    assert len({t for _ in range(4) for t in text(temperature=0)}) == 1  # greedy is greedy
    three = chat(api, n=3, temperature=1.5, seed=7, max_tokens=12).json()
    assert [c["index"] for c in three["choices"]] == [0, 1, 2]
    assert three["usage"]["completion_tokens"] == sum(
        s["challenge"]["completion_tokens"] + s["draft"]["completion_tokens"]
        for s in three["agon"]["choices"]
    )
    assert len({c["message"]["content"] for c in three["choices"]}) > 1
    assert text(temperature=1.5, top_p=1e-9, seed=1) == text(temperature=1.5, top_p=1e-9, seed=2)  # top_p


def test_a_stop_string_ends_the_answer_and_is_not_returned(api):
    how = {"temperature": 1.5, "seed": 3, "max_tokens": 12}
    full = chat(api, **how).json()["choices"][0]["message"]["content"]
    stop = next(ch for ch in full[1:] if ch.strip())  # the same seed samples the same text up to it
    got = chat(api, **how, stop=[stop]).json()["choices"][0]
    assert got["message"]["content"] == full[: full.index(stop)] and got["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("fields", "param", "said"),
    [
        ({"max_tokens": -5}, "max_tokens", "between 1"),
        ({"max_tokens": 0}, "max_tokens", "between 1"),
        ({"max_completion_tokens": 2.5}, "max_completion_tokens", "integer"),
        ({"max_tokens": 3, "max_completion_tokens": 4}, "max_tokens", "disagree"),
        ({"temperature": math.nan}, "temperature", "number"),
        ({"temperature": -1}, "temperature", "between 0"),
        ({"temperature": "hot"}, "temperature", "number"),
        ({"top_p": 0}, "top_p", "above 0"),
        ({"top_p": True}, "top_p", "number"),
        ({"seed": "3"}, "seed", "integer"),
        ({"n": True}, "n", "integer"),
        ({"n": 0}, "n", "between 1 and 8, got 0"),
        ({"n": 2, "stream": True}, "n", "stream"),
        ({"stop": [1]}, "stop", "string"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
        ({"stream": "yes"}, "stream", "true or false"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "stream: true"),
        ({"tools": [{"type": "function"}]}, "tools", "not supported"),
        ({"presence_penalty": 1}, "presence_penalty", "other than 0"),
        ({"messages": [{"role": "user", "content": "\ud800"}]}, "messages", "surrogate"),
    ],
)
def test_invalid_fields_are_a_400_naming_the_field(api, fields, param, said):
    body = {"model": "cascade", "messages": [{"role": "user", "content": "What is 2 + 3?"}], **fields}
    raw = json.dumps(body).encode()  # json.dumps writes NaN and a lone surrogate as given
    got = api.post("/v1/chat/completions", content=raw, headers={**AUTH, "Content-Type": "application/json"})
    assert got.status_code == 400, got.text
    err = got.json()["error"]
    assert err["param"] == param and said in err["message"] and err["type"] == "invalid_request_error"


def test_every_path_and_method_answers_openai_shaped_json(api):
    for method, path, status in [
        ("GET", "/nope", 404),
        ("GET", "/v1/chat/completions", 405),
        ("DELETE", "/v1/models", 405),
        ("POST", "/health", 405),
    ]:
        got = api.request(method, path, headers=AUTH)
        assert got.status_code == status and set(got.json()["error"]) == {"message", "type", "param", "code"}
    assert api.get("/v1/models").json()["error"]["code"] == "invalid_api_key"
    assert [m["id"] for m in api.get("/v1/models", headers=AUTH).json()["data"]] == [
        "cascade",
        "pair/agent_a",
        "pair/agent_b",
    ]  # --served-model-name, not the run folder's name


def test_streaming_sends_the_draft_as_reasoning_then_the_answer_then_usage_and_done(api):
    body = {"model": "cascade", "messages": [{"role": "user", "content": "What is 2 + 3?"}]}
    whole = chat(api, temperature=0, seed=1).json()
    with api.stream(
        "POST",
        "/v1/chat/completions",
        json={**body, "stream": True, "stream_options": {"include_usage": True}, "temperature": 0, "seed": 1},
        headers=AUTH,
    ) as got:
        assert got.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in got.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0]["role"] == "assistant"
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    content = "".join(d.get("content", "") for d in deltas)
    assert reasoning == whole["agon"]["draft"]["completion"]
    assert content == whole["choices"][0]["message"]["content"]
    assert [k for k, d in enumerate(deltas) if "reasoning_content" in d] < [
        k for k, d in enumerate(deltas) if d.get("content")
    ]  # the draft arrives first
    assert chunks[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]


def test_metrics_are_prometheus_text(api):
    chat(api, max_tokens=2)
    chat(api, max_tokens=-1)
    text = api.get("/metrics").text
    assert 'agon:requests_total{model_name="cascade",status="200"}' in text
    assert 'agon:requests_total{model_name="cascade",status="400"}' in text  # the model the body named
    assert "# TYPE agon:e2e_request_latency_seconds histogram" in text
    assert 'agon:e2e_request_latency_seconds_bucket{model_name="cascade",le="+Inf"}' in text
    assert (
        "agon:num_requests_waiting 0" in text and 'agon:generation_tokens_total{model_name="cascade"}' in text
    )


def test_top_k_is_honoured(api):
    def text(**f):
        return chat(api, max_tokens=12, **f).json()["choices"][0]["message"]["content"]

    greedy = text(temperature=0)
    assert text(temperature=1.5, top_k=1, seed=1) == text(temperature=1.5, top_k=1, seed=2) == greedy
    assert len({text(temperature=1.5, top_k=-1, seed=s) for s in range(4)}) > 1  # -1: every token


def test_vllms_sampling_fields_change_the_answer_as_vllms_do(api):
    def text(**f):
        return chat(api, model="pair/agent_b", max_tokens=12, **f).json()["choices"][0]["message"]["content"]

    greedy = text(temperature=0)
    assert text(temperature=1.5, min_p=1.0, seed=1) == text(temperature=1.5, min_p=1.0, seed=2) == greedy
    assert text(temperature=0, repetition_penalty=50) != greedy  # the tiny model repeats "\n"
    assert text(temperature=0, repetition_penalty=1.0, min_p=0, ignore_eos=False) == greedy


def test_logprobs_are_each_tokens_for_an_adapter_alone_and_refused_for_the_cascade(api, cascade):
    got = chat(api, model="pair/agent_b", temperature=0, max_tokens=6, logprobs=True, top_logprobs=0).json()
    choice = got["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == got["usage"]["completion_tokens"] == 6
    assert "".join(t["token"] for t in content) == choice["message"]["content"]
    assert all(t["logprob"] <= 0 and t["bytes"] == list(t["token"].encode()) for t in content)
    assert chat(api, model="pair/agent_b", max_tokens=6).json()["choices"][0]["logprobs"] is None
    refused = chat(api, logprobs=True)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "logprobs"


def test_top_logprobs_lists_each_steps_most_likely_tokens_the_sampled_one_first_when_greedy(api):
    """OpenAI's ``top_logprobs``: k alternatives per token, most likely first, each with its text
    and bytes; greedy, the sampled token is the first alternative with the same log-prob; with
    top_k 2 truncation leaves at most 2 (the others could not have been drawn)."""
    got = chat(api, model="pair/agent_b", temperature=0, max_tokens=5, logprobs=True, top_logprobs=3).json()
    content = got["choices"][0]["logprobs"]["content"]
    assert len(content) == 5
    for t in content:
        top = t["top_logprobs"]
        values = [a["logprob"] for a in top]
        assert len(top) == 3 and values == sorted(values, reverse=True)
        assert top[0]["token"] == t["token"] and top[0]["logprob"] == t["logprob"]
        assert all(a["bytes"] == list(a["token"].encode()) for a in top)
    sampled = dict(model="pair/agent_b", temperature=1.0, top_k=2, seed=5, max_tokens=5, logprobs=True)
    content = chat(api, **sampled, top_logprobs=4).json()["choices"][0]["logprobs"]["content"]
    for t in content:
        top = t["top_logprobs"]
        assert 1 <= len(top) <= 2 and t["token"] in [a["token"] for a in top]
        assert abs(sum(math.exp(a["logprob"]) for a in top) - 1) < 1e-4  # renormalised over the two kept
    again = chat(api, **sampled).json()["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in again] == [t["token"] for t in content]  # asking for them draws nothing


def test_include_stop_str_in_output_keeps_the_stop_string_whole_and_streamed(api):
    how = {"temperature": 1.5, "seed": 3, "max_tokens": 12}
    full = chat(api, **how).json()["choices"][0]["message"]["content"]
    stop = next(ch for ch in full[1:] if ch.strip())
    whole = chat(api, **how, stop=[stop], include_stop_str_in_output=True).json()["choices"][0]
    assert whole["message"]["content"] == full[: full.index(stop) + 1] and whole["finish_reason"] == "stop"
    deltas = streamed(api, **how, stop=[stop], include_stop_str_in_output=True)
    assert "".join(d.get("content", "") for d in deltas) == whole["message"]["content"]


def streamed(api, **fields) -> list[dict]:
    body = {"model": "cascade", "messages": [{"role": "user", "content": "What is 2 + 3?"}], **fields}
    with api.stream("POST", "/v1/chat/completions", json={**body, "stream": True}, headers=AUTH) as got:
        lines = [line for line in got.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [c["choices"][0]["delta"] for c in (json.loads(line[6:]) for line in lines[:-1]) if c["choices"]]


def streamed_choices(api, **fields) -> list[dict]:
    body = {"messages": [{"role": "user", "content": "What is 2 + 3?"}], **fields, "stream": True}
    with api.stream("POST", "/v1/chat/completions", json=body, headers=AUTH) as got:
        lines = [line for line in got.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [c["choices"][0] for c in (json.loads(line[6:]) for line in lines[:-1]) if c["choices"]]


def test_streamed_logprobs_come_whole_with_the_finish_reason_as_the_reply_carries_them(api):
    fields = {"model": "pair/agent_b", "temperature": 1.0, "seed": 7, "max_tokens": 8}
    whole = chat(api, **fields, logprobs=True, top_logprobs=2).json()["choices"][0]
    choices = streamed_choices(api, **fields, logprobs=True, top_logprobs=2)
    scored = [c for c in choices if c["logprobs"] is not None]
    assert len(scored) == 1 and scored[0] is choices[-1]
    assert scored[0]["finish_reason"] == whole["finish_reason"]
    assert scored[0]["logprobs"] == whole["logprobs"]
    assert "".join(c["delta"].get("content", "") for c in choices) == whole["message"]["content"]
    assert all(c["logprobs"] is None for c in streamed_choices(api, **fields))  # not asked, none


@pytest.mark.parametrize("model", ["cascade", "pair/agent_b"])
def test_streaming_is_token_by_token_and_joins_to_the_greedy_answer(api, model):
    # 28: the cascade's budget covers the draft (16 at most) and leaves the answer 12
    fields = {"model": model, "temperature": 0, "max_tokens": 28, "seed": 4}
    whole = chat(api, **fields).json()
    deltas = streamed(api, **fields)
    content = [d["content"] for d in deltas if d.get("content")]
    assert "".join(content) == whole["choices"][0]["message"]["content"]
    assert len(content) > 2  # the answer arrives as it is generated, not in one piece when it ends
    if model == "cascade":
        reasoning = [d["reasoning_content"] for d in deltas if d.get("reasoning_content")]
        assert "".join(reasoning) == whole["agon"]["draft"]["completion"] and len(reasoning) > 2


def test_a_streamed_answer_stops_before_a_stop_string_as_the_whole_one_does(api):
    sampled = {"temperature": 1.0, "max_tokens": 32, "seed": 4}  # 16 for the draft at most
    answer = chat(api, **sampled).json()["choices"][0]["message"]["content"]
    assert len(answer) >= 8
    stop = answer[len(answer) // 2 :][:2]  # a string the answer writes after its first characters
    whole = chat(api, **sampled, stop=[stop]).json()["choices"][0]
    content = [d["content"] for d in streamed(api, **sampled, stop=[stop]) if d.get("content")]
    assert "".join(content) == whole["message"]["content"] and len(content) > 1
    assert stop not in whole["message"]["content"] and whole["finish_reason"] == "stop"
