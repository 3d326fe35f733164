"""What ``agon serve`` writes on the wire: OpenAI's shapes of an error, a reply, a streamed chunk.

Pure functions from a request's results to the JSON a client reads (the handlers in
:mod:`~agon_env.serving.handlers` decide *when* to send them). The shapes are OpenAI's, as vLLM's
server writes them: an error is ``{"error": {"message", "type", "param", "code"}}`` whether it is a
whole response or a server-sent event after the stream has begun (the ``openai`` client raises an
``APIError`` carrying it for either); a ``cascade`` reply carries the draft in the extra field
``agon`` (:func:`cascade_extra`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.responses import JSONResponse

from agon_env.serving.cascade import CascadeAnswer, Stage
from agon_env.serving.requests import ChatRequest

EXTRA = "agon"
"""The extra response field of a ``cascade`` reply (OpenAI clients keep unknown fields:
``response.model_extra["agon"]`` in the ``openai`` package)."""
ERROR_TYPES = {
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout",
    413: "invalid_request_error",
    415: "invalid_request_error",
    503: "server_busy",
    504: "timeout",
}
"""OpenAI's ``type`` for a status (otherwise ``invalid_request_error`` below 500, ``server_error`` above)."""
RETRY_AFTER_S = 1
"""Seconds a client told 503 waits before it retries (``Retry-After``; the ``openai`` client honours it)."""

Result = CascadeAnswer | Stage
"""One choice's answer: a cascade's two stages, or an adapter's one."""


def error_body(
    status: int, message: str, kind: str | None = None, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    kind = kind or ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code or str(status)}}


def error(
    status: int,
    message: str,
    kind: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A whole error response."""
    return JSONResponse(error_body(status, message, kind, code, param), status, headers=dict(headers or {}))


def error_event(status: int, message: str) -> bytes:
    """An error after a stream's first byte (the status line is sent already): an event whose data
    holds ``error``, which the ``openai`` client raises as an ``APIError`` with that body."""
    return event(error_body(status, message))


def event(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def cascade_extra(a: CascadeAnswer) -> dict[str, Any]:
    """What a ``cascade`` reply carries besides the final turn: the draft, what the challenger read,
    the parsed final answer, and each stage's tokens and seconds."""
    return {
        "draft": a.draft.to_dict(),
        "shown": a.shown,
        "challenger_text": a.challenger_text,
        "challenge": a.challenge.to_dict(),
        "answer": a.answer,
    }


def stages(result: Result) -> list[Stage]:
    return [result.draft, result.challenge] if isinstance(result, CascadeAnswer) else [result]


def usage(all_stages: Sequence[Stage]) -> dict[str, int]:
    prompt = sum(s.prompt_tokens for s in all_stages)
    completion = sum(s.completion_tokens for s in all_stages)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def final(result: Result, stop: Sequence[str], keep_stop: bool = False) -> tuple[str, str]:
    """The reply's text and finish reason: the answering stage's, cut at a request's own stop
    string (before it, as OpenAI cuts; after it with ``keep_stop``, vLLM's
    ``include_stop_str_in_output``). The run's ``</answer>`` stays: it is the answer format."""
    last = result.challenge if isinstance(result, CascadeAnswer) else result
    text, reason = last.completion, last.finish_reason
    cuts = [(text.find(s), s) for s in stop if s in text]
    if cuts:
        at, found = min(cuts)
        return text[: at + (len(found) if keep_stop else 0)], "stop"
    return text, reason


def logprobs(stage: Stage, decode: Callable[[int], str]) -> dict[str, Any]:
    """A choice's ``logprobs`` in OpenAI's shape: each completion token's text, bytes and log-prob,
    and with ``top_logprobs`` its most likely alternatives, most likely first."""

    def entry(token: int, value: float) -> dict[str, Any]:
        text = decode(token)
        return {"token": text, "logprob": value, "bytes": list(text.encode())}

    tops = stage.token_top or ((),) * len(stage.token_ids)
    content = [
        {**entry(token, value), "top_logprobs": [entry(t, v) for t, v in top]}
        for token, value, top in zip(stage.token_ids, stage.token_logprobs, tops, strict=True)
    ]
    return {"content": content}


def reply(
    request: ChatRequest,
    rid: str,
    created: int,
    results: Sequence[Result],
    decode: Callable[[int], str] | None = None,
) -> dict[str, Any]:
    """A whole ``chat.completion``: one choice per result, usage over every stage of every choice;
    ``decode``: a token's text, for ``logprobs``."""
    choices, every = [], []
    for i, result in enumerate(results):
        text, reason = final(result, request.stop, request.keep_stop)
        scores = None
        if request.logprobs and decode is not None and isinstance(result, Stage):
            scores = logprobs(result, decode)
        message = {"role": "assistant", "content": text}
        choices.append({"index": i, "message": message, "logprobs": scores, "finish_reason": reason})
        every += stages(result)
    out: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": choices,
        "usage": usage(every),
    }
    if isinstance(results[0], CascadeAnswer):
        out[EXTRA] = cascade_extra(results[0])
        if len(results) > 1:
            out[EXTRA]["choices"] = [cascade_extra(r) for r in results if isinstance(r, CascadeAnswer)]
    return out


def chunk(
    rid: str,
    created: int,
    model: str,
    delta: Mapping[str, Any],
    finish: str | None = None,
    scores: Mapping[str, Any] | None = None,
) -> bytes:
    """One streamed ``chat.completion.chunk`` of choice 0; ``scores``: its ``logprobs``."""
    choice = {"index": 0, "delta": dict(delta), "logprobs": scores, "finish_reason": finish}
    return event(
        {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }
    )


def usage_chunk(rid: str, created: int, model: str, counts: Mapping[str, int]) -> bytes:
    """The last chunk when ``stream_options.include_usage`` asks for it: no choices, the usage."""
    data = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": dict(counts),
    }
    return event(data)


DONE = b"data: [DONE]\n\n"
