"""A cascade is reproducible (issue 59, item 3): temperature 0 is greedy in both stages, ``agon serve
--seed`` seeds the requests that bring no seed, and ``max_tokens`` bounds the draft and the answer
together. The tiny run samples greedily, so each test first makes both seats sample at 1.0."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from agon_env.serving.cascade import tuned
from agon_env.serving.server import build_app

QUESTION = "What is 2 + 3?"
AUTH = {"Authorization": "Bearer k"}


def hot(cascade, seed: int = 0):
    """The tiny run's cascade with both adapters sampling at temperature 1."""
    agents = {name: tuned(agent, {"temperature": 1.0}) for name, agent in cascade.agents.items()}
    return dataclasses.replace(cascade, agents=agents, seed=seed, timings=[])


def test_temperature_zero_is_greedy_in_the_draft_too(cascade):
    c = hot(cascade)
    sampled = {c.answer_many([QUESTION], seeds=[s])[0].draft.completion for s in range(4)}
    assert len(sampled) > 1  # the run's draft samples ...
    greedy = {
        c.answer_many([QUESTION], sampling={"temperature": 0.0}, seeds=[s])[0].draft.completion
        for s in range(4)
    }
    assert len(greedy) == 1  # ... and a request at temperature 0 drafts greedily


def test_max_tokens_bounds_the_draft_and_the_answer_together(cascade):
    c = hot(cascade)
    for total in (2, 5, 9):
        a = c.answer_many([QUESTION], sampling={"max_new_tokens": total}, seeds=[3])[0]
        assert 1 <= a.draft.completion_tokens <= total - 1
        assert a.draft.completion_tokens + a.challenge.completion_tokens <= total
    with TestClient(build_app(c, api_key="k")) as api:
        body = {"model": "cascade", "messages": [{"role": "user", "content": QUESTION}]}
        got = api.post("/v1/chat/completions", json={**body, "max_tokens": 5}, headers=AUTH).json()
        assert got["usage"]["completion_tokens"] <= 5
        one = api.post("/v1/chat/completions", json={**body, "max_tokens": 1}, headers=AUTH)
        assert one.status_code == 400 and "at least 2" in one.json()["error"]["message"]


def test_the_serve_seed_seeds_requests_that_bring_none(cascade):
    body = {"model": "cascade", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 12}

    def answers(seed: int) -> list[str]:
        with TestClient(build_app(hot(cascade, seed), api_key="k")) as api:
            replies = [api.post("/v1/chat/completions", json=body, headers=AUTH).json() for _ in range(2)]
        return [r["choices"][0]["message"]["content"] + r["agon"]["draft"]["completion"] for r in replies]

    first = answers(1)
    assert first[0] == first[1]  # the same question under the same --seed: the same answer
    assert len({answers(s)[0] for s in (2, 3, 4)} | {first[0]}) > 1  # another --seed, another answer
