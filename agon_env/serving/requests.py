"""What an OpenAI chat request asks for, checked: the one parser of ``/v1/chat/completions`` bodies.

:func:`parse_chat` turns a decoded JSON body into a :class:`ChatRequest` or raises
:class:`RequestError` (a status, a one-line message and the ``param`` it names, as OpenAI's and
vLLM's servers name it). Every sampling field is either honoured or refused by name:

=============================  =====================================================================
field                          what it does
=============================  =====================================================================
``max_completion_tokens``      the completion's budget (``max_tokens``, its older name, too); for
                               ``cascade`` the draft's and the answer's together (the draft first)
``temperature``, ``top_p``     the answering stage's sampling (0 = greedy, the draft too; the run's
                               when absent)
``seed``                       seeds both stages; absent, ``agon serve --seed`` does
``stop``                       a string or up to 4 strings that end the answer (not returned in it)
``n``                          that many answers, each its own seed (not with ``stream``)
``stream``, ``stream_options`` server-sent chunks; ``include_usage`` adds a last usage chunk
=============================  =====================================================================

Fields no OpenAI model reads here (``logprobs``, ``tools``, ``response_format``, penalties other than
0 ...) are refused with a 400 that names them, not silently ignored. The checks are pure: the
fuzz test in ``tests/serving/test_server_fuzz.py`` throws mutated bodies at them through the app.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_N = 8
"""Most answers one request may ask for (each is a row of the batch)."""
MAX_STOP = 4
"""Most ``stop`` strings, as OpenAI's API allows."""
UNSUPPORTED = (
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "response_format",
    "logit_bias",
    "audio",
    "modalities",
    "prediction",
)
"""Fields that would change the reply's shape or content in ways this server does not: a 400 naming
the field when set to anything but null/false/empty (clients send ``logprobs: false`` by default)."""
ZERO_ONLY = ("presence_penalty", "frequency_penalty")
"""Accepted at 0 (their default) only."""


class RequestError(ValueError):
    """A request the server refuses: ``status`` (4xx), a one-line message and the field it names."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat request: the model, the question and how to answer it."""

    model: str
    question: str
    sampling: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the answering stage's :class:`~agon_env.options.SamplingParams`
    (``max_new_tokens``, ``temperature``, ``top_p``)."""
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1
    stream: bool = False
    include_usage: bool = False


def _number(body: Mapping[str, Any], name: str, low: float, high: float, integer: bool = False) -> Any:
    """``body[name]`` checked to be a (finite, non-boolean) number in [low, high]; None when absent."""
    value = body.get(name)
    if value is None:
        return None
    kind = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        raise RequestError(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}", name)
    if not low <= value <= high:
        raise RequestError(f"{name} must be between {low:g} and {high:g}, got {value!r}", name)
    return value


def _stop(value: Any) -> tuple[str, ...]:
    strings = [value] if isinstance(value, str) else value
    if value is None:
        return ()
    if not isinstance(strings, list) or not all(isinstance(s, str) and s for s in strings):
        raise RequestError("stop must be a non-empty string or a list of them", "stop")
    if len(strings) > MAX_STOP:
        raise RequestError(f"stop holds at most {MAX_STOP} strings, got {len(strings)}", "stop")
    return tuple(dict.fromkeys(strings))


def question_of(messages: Any) -> str:
    """The last user message's text (a string, or the text parts of a content list)."""
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, list):
                    parts = [
                        p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"
                    ]
                    content = "\n".join(parts) if all(isinstance(p, str) for p in parts) else None
                if isinstance(content, str):
                    return _text(content)
                break
    raise RequestError("messages must be a list holding a user message with text content", "messages")


def _text(text: str) -> str:
    """``text``, refused when it holds what UTF-8 cannot carry (a lone surrogate from ``"\\ud800"``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(
            "messages: the text holds a lone surrogate (not valid Unicode)", "messages"
        ) from None
    return text


def parse_chat(body: Any, models: Sequence[str], max_tokens: int | None = None) -> ChatRequest:
    """``body`` (decoded JSON) as a :class:`ChatRequest`, or :class:`RequestError`.

    ``models``: the served model ids; ``max_tokens``: the largest budget a request may ask for
    (the model's window bounds it in :meth:`~agon_env.serving.cascade.Cascade.check` anyway)."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or model not in models:
        raise RequestError(
            f"unknown model {model!r}; models: {', '.join(models)}", "model", 404, "model_not_found"
        )
    for name in UNSUPPORTED:
        if body.get(name) not in (None, False, [], {}):
            raise RequestError(f"{name} is not supported by this server", name)
    for name in ZERO_ONLY:
        if _number(body, name, -2, 2) not in (None, 0):
            raise RequestError(f"{name} other than 0 is not supported by this server", name)
    budget = {
        name: _number(body, name, 1, max_tokens or 2**31, integer=True)
        for name in ("max_tokens", "max_completion_tokens")
    }
    if None not in budget.values() and budget["max_tokens"] != budget["max_completion_tokens"]:
        raise RequestError("max_tokens and max_completion_tokens disagree; give one", "max_tokens")
    sampling = {
        "max_new_tokens": budget["max_completion_tokens"] or budget["max_tokens"],
        "temperature": _number(body, "temperature", 0, 2),
        "top_p": _number(body, "top_p", 0, 1),
    }
    if sampling["top_p"] == 0:
        raise RequestError("top_p must be above 0 (use temperature 0 for greedy)", "top_p")
    n = _number(body, "n", 1, MAX_N, integer=True) or 1
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RequestError(f"stream must be true or false, got {stream!r}", "stream")
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise RequestError("stream_options must be an object, and only with stream: true", "stream_options")
    include = (options or {}).get("include_usage", False)
    if not isinstance(include, bool):
        raise RequestError("stream_options.include_usage must be true or false", "stream_options")
    if stream and n > 1:
        raise RequestError("n > 1 is not supported with stream: true", "n")
    return ChatRequest(
        model=model,
        question=question_of(body.get("messages")),
        sampling={k: v for k, v in sampling.items() if v is not None},
        stop=_stop(body.get("stop")),
        seed=_number(body, "seed", -(2**63), 2**63 - 1, integer=True),
        n=n,
        stream=bool(stream),
        include_usage=include,
    )
