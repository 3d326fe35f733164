"""``agon study verify``: a results file's summary, recomputed from its outcome lists alone.

Also checks what the summary rests on: every outcome list is 0/1/null (null: unjudged, as many as
the unit's recorded score errors and time-outs) and as long as the test
problem ids (and their prompt hashes), and ``complete`` says what ``missing`` says. Any
mismatch is named by its path in the document (``summary.paired.agon − grpo, standalone.mean``).
The summary is compared on the keys this version recomputes: a field added to the summary since a
file was recorded is not a tampering (the file holds every outcome it is recomputed from), while an
arm, seed, method or comparison missing from the recorded summary is.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from agon_env.errors import UserError
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.study.analysis import summary_from_outcomes
from agon_env.study.diff import units
from agon_env.study.errors import VerifyError
from agon_env.study.plan import unit_name
from agon_env.study.results_file import ResultsDocument, UnitOutcome, read_results

FIELD = re.compile(r"[a-z][a-z_]*")
"""How a summary field is named (``discordant``, ``per_seed``). Arms, seeds, methods
(``standalone:agent_a``) and comparisons (``agon − grpo``) are named by the study's data instead."""


def data_names(doc: ResultsDocument) -> frozenset[str]:
    """Every name the study's own data gives a summary key: its arms, seeds, units, methods and
    comparisons (any key of its outcomes, and the plan's arms)."""
    names: set[str] = set(doc.get("plan", {}).get("arms") or [])

    def walk(x: JSONValue) -> None:
        if isinstance(x, dict):
            names.update(map(str, x))
            for v in x.values():
                walk(v)

    walk(doc["outcomes"])
    return frozenset(names)


def differences(a: JSONValue, b: JSONValue, path: str = "", data: frozenset[str] | None = None) -> list[str]:
    """Where ``a`` (recomputed) and ``b`` (recorded) differ (exactly: the summary is recomputed by
    the same code), as paths. A key only the recomputed side has is a field added after the file
    was written, not a difference, when it is named like a field (:data:`FIELD`) and not by the
    study's data (``data``: :func:`data_names`; None: every missing key is a difference): a missing
    arm, seed, method or comparison always is. A recorded key this code does not recompute is a
    difference too: nothing vouches for it."""
    if isinstance(a, dict) and isinstance(b, dict):
        new = {k for k in set(a) - set(b) if data is not None and FIELD.fullmatch(str(k)) and k not in data}
        odd = (set(a) ^ set(b)) - new
        out = [f"{path}.{k}: missing on one side" for k in sorted(odd, key=str)]
        return out + [d for k in a if k in b for d in differences(a[k], b[k], f"{path}.{k}", data)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return [] if a == b or both_nan else [f"{path}: recorded {b!r}, recomputed {a!r}"]


def unjudged_counts(name: str, unit: UnitOutcome) -> list[str]:
    """A null outcome is an answer the verifier gave no verdict (:func:`agon_env.stats.judged`):
    each method's nulls, final and draft, must be as many as the unit's recorded score errors and
    time-outs (each of those is one turn's answer; a method has at most two turns), where recorded."""
    wrong = []
    for m, values in unit.get("outcomes", {}).items():
        errors, timeouts = (unit.get(k) or {} for k in ("score_errors", "score_timeouts"))
        if errors.get(m) is None or timeouts.get(m) is None:
            continue  # not recorded: nothing to check against
        nulls = sum(v is None for v in [*values, *unit.get("first_outcomes", {}).get(m, [])])
        if nulls != errors[m] + timeouts[m]:
            wrong.append(
                f"outcomes.{name}.outcomes.{m}: {nulls} null outcome(s), but {errors[m]} score error(s) "
                f"and {timeouts[m]} time-out(s) recorded"
            )
    return wrong


def problems(doc: ResultsDocument) -> list[str]:
    """What is wrong with the outcome lists themselves (lengths, values, completeness: every unit of
    the plan's arms × seeds recorded or named missing)."""
    ids = doc["problems"]["test"]["ids"]
    wrong = []
    if len(doc["problems"]["test"]["prompt_sha256"]) != len(ids):
        wrong.append("problems.test: as many prompt hashes as ids")
    o = doc["outcomes"]
    recorded = units(doc)
    for name, unit in recorded.items():
        for kind in ("outcomes", "first_outcomes"):
            for m, values in unit.get(kind, {}).items():
                if len(values) != len(ids) or any(v not in (0, 1, None) for v in values):
                    wrong.append(f"outcomes.{name}.{kind}.{m}: {len(ids)} values of 0, 1 or null expected")
        wrong += unjudged_counts(name, unit)
    plan = doc.get("plan", {})
    if isinstance(plan.get("arms"), list) and isinstance(plan.get("seeds"), list):
        # every planned unit is either in the outcomes or named missing: none quietly dropped
        planned = {unit_name(arm, s) for arm in plan["arms"] for s in plan["seeds"]}
        accounted = (set(recorded) - {"base"}) | (set(o["missing"]) - {"base"})
        if accounted != planned:
            odd = sorted(planned ^ accounted)[:3]
            wrong.append(f"outcomes: the plan's units, recorded or missing, differ ({', '.join(odd)})")
    if doc.get("complete") != (not o["missing"]):
        wrong.append(f"complete: recorded {doc.get('complete')!r} with missing units {o['missing']}")
    return wrong


PLAN_VIEW = (
    "arms",
    "seeds",
    "test_problems",
    "val_problems",
    "eval_seeds",
    "comparisons",
    "exploratory",
    "decision",
    "study",
)
"""The fields of a results file's ``plan`` that follow from the plan's mapping alone (the rest,
model and sampling, need its preset and plugins resolved, which :func:`unbound` tries too)."""


LATER = ("arm_settings",)
"""Fields of a results file's ``plan`` added since files were recorded: absent, they are not a
departure (present, they must be what the registered plan resolves to)."""


def _view(registered: JSONRecord) -> JSONRecord:
    """What a results file's ``plan`` says for :data:`PLAN_VIEW`, from the registered mapping."""
    from agon_env.study.plan import Evaluation, split

    e = {**Evaluation().__dict__, **registered.get("evaluation", {})}
    return {
        "arms": list(registered["arms"]),
        "seeds": registered["seeds"],
        "test_problems": e["test_problems"],
        "val_problems": e["val_problems"],
        "eval_seeds": e["seeds"],
        "comparisons": [list(split(c)) for c in registered.get("comparisons", [])],
        "exploratory": [list(split(c)) for c in registered.get("exploratory", [])],
        "decision": registered["decision"],
        "study": registered,
    }


def unbound(doc: ResultsDocument) -> list[str]:
    """Where a results file departs from its own registration (none when not registered): the
    registered plan no longer hashes to its recorded hash, the file's plan hash or plan view is not
    the registered plan's, or the summary's coverage is not the registered rule's."""
    from agon_env.study.plan import from_dict

    reg = doc.get("registration")
    if not reg:
        return []
    wrong = []
    registered = reg.get("plan") or {}
    try:
        plan = from_dict(registered)
        if plan.sha256() != reg.get("plan_sha256"):
            wrong.append(
                f"registration.plan: hashes to {plan.sha256()[:12]}, registered as "
                f"{str(reg.get('plan_sha256'))[:12]}"
            )
    except (UserError, TypeError, ValueError, KeyError) as exc:
        return [f"registration.plan: not a plan ({exc})"]
    recorded = (doc.get("hashes") or {}).get("plan_sha256")
    if recorded != reg.get("plan_sha256"):
        wrong.append(
            f"hashes.plan_sha256: {str(recorded)[:12]}, not the registered {str(reg.get('plan_sha256'))[:12]}"
        )
    view = doc.get("plan", {})
    want = _view(plan.as_dict())
    try:  # the whole view, where the plan's preset and plugins resolve here
        from agon_env.study.results import plan_record

        want = plan_record(plan)
    except (UserError, ImportError, OSError, ValueError):
        pass
    wrong += [
        f"plan.{k}: not what the registered plan resolves to"
        for k in want
        if view.get(k) != want[k] and not (k in LATER and k not in view)
    ]
    confidence = plan.decision.confidence
    used = doc.get("summary", {}).get("confidence")
    if used is not None and used != confidence:
        wrong.append(f"summary.confidence: {used!r}, the registered rule's is {confidence!r}")
    return wrong


def late(doc: ResultsDocument) -> str | None:
    """When the registration is later than a unit's results (``registered_at`` after its
    ``written_at``: the plan was frozen after results existed), which; else None."""
    reg = doc.get("registration")
    if not reg or not reg.get("registered_at"):
        return None
    # a unit without a time (written before units kept one) cannot be placed: "~" sorts after any time
    before = sorted((r.get("written_at", "~"), n) for n, r in units(doc).items())
    before = [(t, n) for t, n in before if t < reg["registered_at"]]
    if not before:
        return None
    return (
        f"registration.registered_at: {reg['registered_at']} is after the results of {len(before)} "
        f"unit(s) (first {before[0][1]}, written {before[0][0]})"
    )


def verify(path: Path) -> JSONRecord:
    """The document at ``path`` when its summary recomputes and it is bound to its registration;
    a :class:`VerifyError` naming every mismatch otherwise."""
    doc = read_results(path).document
    wrong = problems(doc)  # the summary is recomputed only from well-formed outcome lists
    wrong += unbound(doc) + [w for w in [late(doc)] if w]
    wrong = wrong or differences(summary_from_outcomes(doc), doc["summary"], "summary", data_names(doc))
    if wrong:
        shown = "; ".join(wrong[:5]) + (f"; and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        raise VerifyError(
            f"{path}: {len(wrong)} mismatch(es) with its outcome lists or its registration: {shown}"
        )
    return doc
