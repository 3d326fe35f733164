"""What an OpenAI chat request asks for, checked: the one parser of ``/v1/chat/completions`` bodies.

:func:`parse_chat` turns a decoded JSON body into a :class:`ChatRequest` or raises
:class:`RequestError` (a status, a one-line message and the ``param`` it names, as OpenAI's and
vLLM's servers name it). Every field is either honoured or refused by name; a field this server does
not know is a 400 naming it. vLLM's server accepts unknown fields and only logs them
(``OpenAIBaseModel`` has ``extra="allow"``), so a misspelt ``temprature`` samples at the default
unseen; here the client hears of it:

================================  ==================================================================
field                             what it does
================================  ==================================================================
``messages``                      one user message: the question. The pair was trained on single
                                  questions under the run's own prompts, so a ``system`` (or
                                  ``developer``) message or earlier turns are a 400, not dropped
``max_completion_tokens``         the completion's budget (``max_tokens``, its older name, too); for
                                  ``cascade`` the draft's and the answer's together (the draft first)
``temperature``, ``top_p``,       the answering stage's sampling (temperature 0 = greedy, the draft
``top_k``                         too; ``top_k`` -1 or 0 = all tokens, as vLLM's; the run's when
                                  absent)
``seed``                          seeds both stages; absent, ``agon serve --seed`` does
``stop``                          a string or up to 4 strings that end the answer (not returned in it)
``include_stop_str_in_output``    vLLM's: the reply keeps the stop string that ended it
``min_p``, ``min_tokens``,        vLLM's sampling fields, for the answering stage as vLLM reads them
``repetition_penalty``,           (:class:`~agon_env.options.SamplingParams`; ``min_tokens`` at most
``ignore_eos``,                   the budget)
``stop_token_ids``
``n``                             that many answers, each its own seed (not with ``stream``)
``stream``, ``stream_options``    server-sent chunks; ``include_usage`` adds a last usage chunk
``logprobs``                      each token's log-prob under the sampling that drew it, for an adapter
                                  alone; ``top_logprobs`` (0-20) alternatives too. Streamed, the whole
                                  list comes on the chunk that carries the finish reason
``user``                          accepted and not read (OpenAI's end-user id for abuse monitoring)
================================  ==================================================================

Fields that would change the reply in ways this server does not (``tools``, ``response_format``,
``logit_bias`` ...) are refused with a 400 that names them when set to anything but their default,
and the penalties other than 0 (:data:`NEUTRAL`). The checks are pure: the fuzz test in
``tests/serving/test_server_fuzz.py`` throws mutated bodies at them through the app.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

MAX_N = 8
"""Most answers one request may ask for (each is a row of the batch)."""
MAX_TOP_LOGPROBS = 20
"""OpenAI's bound on ``top_logprobs``."""
MAX_STOP = 4
"""Most ``stop`` strings, as OpenAI's API allows."""
UNSUPPORTED = (
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
NEUTRAL = {"presence_penalty": 0, "frequency_penalty": 0}
"""Numeric fields accepted at the value that leaves sampling as it is, and refused otherwise."""
MAX_STOP_TOKEN_IDS = 64
VLLM_SAMPLING = ("min_p", "repetition_penalty", "min_tokens", "ignore_eos", "stop_token_ids")
"""vLLM's sampling fields, passed to the answering stage's :class:`~agon_env.options.SamplingParams`."""
KNOWN = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "include_stop_str_in_output",
    "n",
    "stream",
    "stream_options",
    "user",
    "logprobs",
    "top_logprobs",
    *UNSUPPORTED,
    *NEUTRAL,
    *VLLM_SAMPLING,
}
"""Every field a body may hold; any other is a 400 naming it."""


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
    (``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``)."""
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    keep_stop: bool = False
    """``include_stop_str_in_output``: the reply ends after the stop string, not before it."""
    logprobs: bool = False
    """Return each completion token's log-prob (an adapter alone; streamed, on the finish chunk)."""

    def with_sampling(self, sampling: Mapping[str, Any]) -> ChatRequest:
        return replace(self, sampling=dict(sampling))


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


def _flag(body: Mapping[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise RequestError(f"{name} must be true or false, got {value!r}", name)
    return value


def _vllm_sampling(body: Mapping[str, Any], budget: int | None) -> dict[str, Any]:
    """vLLM's sampling fields, checked as vLLM checks them (``min_tokens`` within the budget)."""
    out = {
        "min_p": _number(body, "min_p", 0, 1),
        "repetition_penalty": _number(body, "repetition_penalty", 0, 100),
        "min_tokens": _number(body, "min_tokens", 0, budget or 2**31, integer=True),
        "ignore_eos": _flag(body, "ignore_eos"),
    }
    if out["repetition_penalty"] == 0:
        raise RequestError(
            "repetition_penalty must be above 0 (1 leaves sampling as it is)", "repetition_penalty"
        )
    ids = body.get("stop_token_ids")
    if ids is not None:
        if not isinstance(ids, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**31 for t in ids
        ):
            raise RequestError("stop_token_ids must be a list of token ids (integers >= 0)", "stop_token_ids")
        if len(ids) > MAX_STOP_TOKEN_IDS:
            raise RequestError(f"stop_token_ids holds at most {MAX_STOP_TOKEN_IDS} ids", "stop_token_ids")
        out["stop_token_ids"] = tuple(dict.fromkeys(ids))
    return {k: v for k, v in out.items() if v is not None}


def _logprobs(body: Mapping[str, Any], model: str) -> tuple[bool, int]:
    """``logprobs``: the sampled tokens' log-probs, and ``top_logprobs`` (0 to 20) alternatives at
    each step, for an adapter alone (a cascade's reply is the second of two stages)."""
    wanted = bool(_flag(body, "logprobs"))
    top = _number(body, "top_logprobs", 0, MAX_TOP_LOGPROBS, integer=True) or 0
    if top and not wanted:
        raise RequestError("top_logprobs needs logprobs: true", "top_logprobs")
    if wanted and model == "cascade":
        raise RequestError("logprobs is for an adapter alone, not the cascade's two stages", "logprobs")
    return wanted, top


def question_of(messages: Any) -> str:
    """The one user message's text (a string, or the text parts of a content list); a system
    message or earlier turns are refused, since the run's own prompts frame the question."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a list holding a user message with text content", "messages")
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if roles != ["user"]:
        others = sorted({str(r) for r in roles if r != "user"}) or ["more than one user"]
        raise RequestError(
            "messages must be one user message: the run's own system prompt and worked examples frame it, "
            f"so {', '.join(others)} messages are not read (send the question alone)",
            "messages",
        )
    content = messages[0].get("content")
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "\n".join(parts) if parts and all(isinstance(p, str) for p in parts) else None
    if not isinstance(content, str):
        raise RequestError("messages must be a list holding a user message with text content", "messages")
    return _text(content)


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
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}: this server does not read it", unknown[0])
    for name in UNSUPPORTED:
        if body.get(name) not in (None, False, [], {}):
            raise RequestError(f"{name} is not supported by this server", name)
    for name, neutral in NEUTRAL.items():
        if _number(body, name, -(2**31), 2**31) not in (None, neutral):
            raise RequestError(f"{name} other than {neutral} is not supported by this server", name)
    keep = _flag(body, "include_stop_str_in_output")
    logprobs, top_logprobs = _logprobs(body, model)
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise RequestError("user must be a string", "user")
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
        "top_k": _number(body, "top_k", -1, 2**31, integer=True),
        "top_logprobs": top_logprobs or None,
    }
    if sampling["top_k"] == -1:  # vLLM's spelling of "all tokens"; SamplingParams spells it 0
        sampling["top_k"] = 0
    sampling.update(_vllm_sampling(body, sampling["max_new_tokens"]))
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
        keep_stop=bool(keep),
        logprobs=logprobs,
    )
