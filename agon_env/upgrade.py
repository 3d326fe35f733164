"""Old files read as today's: the one place that knows what earlier versions wrote.

Run folders and results files outlive the code that wrote them (``docs/results/*.json``
are read by tests and reports; a user's runs are evaluated months later). The API and the
command line know only today's names; a file written under an older layout is brought to
today's here, at the moment it is read, and nowhere else:

=========================================  ===========================================
what an older version wrote                what it is today
=========================================  ===========================================
``env.redact_answer: true``                ``env.exchange: redacted``
``env.exchange: null``                     ``env.exchange: summary`` (or the above)
``model.prefix_attention``,                always on (both settings measured the same;
``grpo.stream_prefix``                     docs/benchmarks.md, "Cost levers"): dropped
method ``zero-shot`` (results up to        ``base-few-shot``: it showed the worked
35d8054, e.g. replication_cpu.json)        examples (the default ``prompts.few_shot``)
=========================================  ===========================================

A config built in code or given on the command line is never upgraded: an old key there is
an unknown key, refused with a suggestion like any other.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from agon_env.json_value import JSONRecord, JSONValue

_DROPPED = (("model", "prefix_attention"), ("grpo", "stream_prefix"))
_RENAMED_METHODS = {"zero-shot": "base-few-shot"}


def upgrade_config(data: Mapping[str, JSONValue]) -> JSONRecord:
    """A stored run config (``config.yaml``, nested) in today's layout; a copy."""
    out = copy.deepcopy(dict(data))
    for section, key in _DROPPED:
        if isinstance(out.get(section), dict):
            out[section].pop(key, None)
    env = out.get("env")
    if isinstance(env, dict) and ("redact_answer" in env or env.get("exchange", "") is None):
        redact = bool(env.pop("redact_answer", False))
        if env.get("exchange") is None:
            env["exchange"] = "redacted" if redact else "summary"
    return out


def method_id(stored: str) -> str:
    """A method family name or id (``zero-shot:base``) as a results file stored it, in
    today's spelling (``base-few-shot:base``)."""
    family, sep, rest = stored.partition(":")
    return _RENAMED_METHODS.get(family, family) + sep + rest
