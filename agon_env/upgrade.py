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
training rate ``divergence/answer_          kept under its own name (:data:`LEGACY_CHANGED`),
disagreement`` (runs before its rename)    flagged as the old definition where shown
=========================================  ===========================================

Each file has one reader that calls in here: ``eval.json`` :mod:`agon_env.evaluation.report_file`,
a study's ``results.json`` :mod:`agon_env.study.results_file`, a run's config
:func:`agon_env.resolved.load_resolved`.

A config built in code or given on the command line is never upgraded: an old key there is
an unknown key, refused with a suggestion like any other.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from agon_env.json_value import JSONRecord, JSONValue

_DROPPED = (("model", "prefix_attention"), ("grpo", "stream_prefix"))
_RENAMED_METHODS = {"zero-shot": "base-few-shot"}

LEGACY_CHANGED = "divergence/answer_disagreement"
"""How runs logged before the rename call today's ``divergence/answer_changed`` (there a missing
answer counted as a change): read under its own name, never as today's metric."""
_UNIT_METHOD_KEYS = ("outcomes", "first_outcomes", "mean_length", "mean_final_length")
"""The per-method maps of a study unit that older versions keyed by the old method names."""


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


def current_methods(methods: Mapping[str, JSONValue]) -> JSONRecord:
    """``methods`` keyed by today's method names (:func:`method_id` of each key)."""
    return {method_id(k): v for k, v in methods.items()}


def upgrade_eval_report(doc: Mapping[str, JSONValue]) -> JSONRecord:
    """An ``eval.json`` document in today's layout (each run's ``methods`` by today's names); a copy."""
    out = copy.deepcopy(dict(doc))
    for run in out.get("runs") or []:
        if isinstance(run, dict) and isinstance(run.get("methods"), dict):
            run["methods"] = current_methods(run["methods"])
    return out


def upgrade_results(doc: Mapping[str, JSONValue]) -> JSONRecord:
    """A study's ``results.json`` document in today's layout (every unit's per-method maps by
    today's method names); a copy."""
    out = copy.deepcopy(dict(doc))
    o = out.get("outcomes") or {}
    units = [o.get("base"), *[r for seeds in (o.get("arms") or {}).values() for r in seeds.values()]]
    for unit in units:
        for key in _UNIT_METHOD_KEYS:
            if unit and isinstance(unit.get(key), dict):
                unit[key] = current_methods(unit[key])
    return out
