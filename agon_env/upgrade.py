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
training rate ``divergence/answer_          kept under its own name (:data:`OLD_METRICS`),
disagreement`` (runs before its rename)    flagged as the old definition where shown
a results file recorded before ``agon      read with the comparisons, two-stage methods and
study`` (its ``plan`` names no             verdict wording those studies ran with
``comparisons``)                           (:data:`PRE_STUDY`, :func:`pre_study`)
a registration without ``preset_sha256``   nothing to hold today's to: not checked
or ``anchor`` (frozen before either)       (:data:`REGISTRATION_ADDED`, :func:`registered`)
=========================================  ===========================================

Each file has one reader that calls in here: ``eval.json`` :mod:`agon_env.evaluation.report_file`,
a study's ``results.json`` :mod:`agon_env.study.results_file`, a run's config
:func:`agon_env.resolved.load_resolved`.

A config built in code or given on the command line is never upgraded: an old key there is
an unknown key, refused with a suggestion like any other.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from agon_env.json_value import JSONRecord, JSONValue
from agon_env.metric_names import CHALLENGE_CHANGED_ANSWER

_DROPPED = (("model", "prefix_attention"), ("grpo", "stream_prefix"))
_RENAMED_METHODS = {"zero-shot": "base-few-shot"}

LEGACY_CHANGED = "divergence/answer_disagreement"
"""How runs logged before the rename call today's ``divergence/answer_changed`` (there a missing
answer counted as a change): read under its own name, never as today's metric."""


@dataclass(frozen=True)
class OldMetric:
    """A training metric logged under a name and definition since replaced: read under its own
    name (never as today's), and flagged where a table or figure shows it."""

    today: str
    """The metric that replaced it."""
    definition: str
    """How it differed, as a table's footnote says it."""
    short: str
    """The same in a figure's few words."""


OLD_METRICS: dict[str, OldMetric] = {
    LEGACY_CHANGED: OldMetric(
        CHALLENGE_CHANGED_ANSWER,
        "which also counted a challenge or draft without an answer as a change and included drafts "
        "with no usable summary",
        "old definition: a missing answer counted as a change",
    ),
}
"""Old metric name -> what it became (one row per rename)."""


def old_metrics(rows: Iterable[Mapping[str, JSONValue]]) -> list[str]:
    """The old metric names (:data:`OLD_METRICS`) that a run's logged ``rows`` hold."""
    logged = {k for r in rows for k in r}
    return [old for old in OLD_METRICS if old in logged]


def shown_metric(today: str, recorded: Callable[[str], bool]) -> str:
    """``today``, or the old metric it replaced when only that one was ``recorded``."""
    if recorded(today):
        return today
    return next((old for old, m in OLD_METRICS.items() if m.today == today and recorded(old)), today)


@dataclass(frozen=True)
class PreStudy:
    """How the studies recorded before ``agon study`` read: their results files name no comparisons
    and no two-stage methods, and their generated blocks word an undecided verdict their own way."""

    comparisons: tuple[tuple[str, str], ...]
    """The paper's claims (agon > coop > grpo), the bonus alone (agon − coop), what the summary's
    stated answer is worth (agon-redacted − agon), and what each channel is worth against text
    summaries and against reading nothing (issue #25)."""
    two_stage: dict[str, str]
    """Arms whose two-stage method was not ``cascade``: grpo's self-cascade."""
    not_shown: str
    """The verdict when neither a difference nor an equivalence is shown."""


PRE_STUDY = PreStudy(
    comparisons=(
        ("agon", "grpo"),
        ("coop", "grpo"),
        ("agon", "coop"),
        ("hidden-draft", "grpo"),
        ("hidden-draft", "agon"),
        ("agon-redacted", "agon"),
        ("agon-latent", "agon"),
        ("agon-none", "agon"),
        ("agon-latent", "agon-none"),
    ),
    two_stage={"grpo": "self-cascade"},
    not_shown="no difference shown",
)


def pre_study(plan: Mapping[str, JSONValue]) -> PreStudy | None:
    """:data:`PRE_STUDY` when a results file's ``plan`` is of a study recorded before ``agon study``
    (it names no ``comparisons``), else None."""
    return None if "comparisons" in plan else PRE_STUDY


REGISTRATION_ADDED: dict[str, str] = {
    "preset_sha256": "the preset's content hash (before it, a registration froze the preset's name alone)",
    "anchor": "what the fingerprint hashes, the task modules' sources among it (before it: the older rules)",
}
"""The fields of ``registration.json`` that registrations frozen before them lack -> what they hold."""


def registered(reg: Mapping[str, JSONValue], key: str, current: JSONValue) -> JSONValue:
    """``reg[key]``; for a field a registration frozen before it lacks (:data:`REGISTRATION_ADDED`),
    ``current``: nothing was registered to hold today's to, so it agrees."""
    if key in reg or key not in REGISTRATION_ADDED:
        return reg[key]
    return current


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
