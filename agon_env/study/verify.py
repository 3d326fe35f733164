"""``agon study verify``: a results file's summary, recomputed from its outcome lists alone.

Also checks what the summary rests on: every outcome list is 0/1 and as long as the test
problem ids (and their prompt hashes), and ``complete`` says what ``missing`` says. Any
mismatch is named by its path in the document (``summary.paired.agon − grpo, standalone.mean``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from agon_env.errors import UserError
from agon_env.study.analysis import summary_from_outcomes
from agon_env.study.plan import unit_name
from agon_env.study.results import current_methods


class VerifyError(UserError, ValueError):
    """A results file whose numbers do not follow from its outcome lists."""


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (exactly: the summary is recomputed by the same code), as paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: missing on one side" for k in sorted(set(a) ^ set(b), key=str)]
        return out + [d for k in a if k in b for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return [] if a == b or both_nan else [f"{path}: recorded {b!r}, recomputed {a!r}"]


def read(path: Path) -> dict[str, Any]:
    """A results file, its method names as today's (files up to 35d8054 call the few-shot base
    ``zero-shot``)."""
    if not path.is_file():
        raise FileNotFoundError(f"no results file {path}")
    doc = json.loads(path.read_text())
    o = doc["outcomes"]
    for unit in [o.get("base"), *[r for seeds in o["arms"].values() for r in seeds.values()]]:
        for key in ("outcomes", "first_outcomes", "mean_length", "mean_final_length"):
            if unit and key in unit:
                unit[key] = current_methods(unit[key])
    return doc


def problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with the outcome lists themselves (lengths, values, completeness: every unit of
    the plan's arms × seeds recorded or named missing)."""
    ids = doc["problems"]["test"]["ids"]
    wrong = []
    if len(doc["problems"]["test"]["prompt_sha256"]) != len(ids):
        wrong.append("problems.test: as many prompt hashes as ids")
    o = doc["outcomes"]
    units = {unit_name(arm, s): r for arm, seeds in o["arms"].items() for s, r in seeds.items()}
    if o.get("base"):
        units["base"] = o["base"]
    for name, unit in units.items():
        for kind in ("outcomes", "first_outcomes"):
            for m, values in unit.get(kind, {}).items():
                if len(values) != len(ids) or any(v not in (0, 1) for v in values):
                    wrong.append(f"outcomes.{name}.{kind}.{m}: {len(ids)} values of 0 or 1 expected")
    plan = doc.get("plan", {})
    if isinstance(plan.get("arms"), list) and isinstance(plan.get("seeds"), list):
        # every planned unit is either in the outcomes or named missing: none quietly dropped
        planned = {unit_name(arm, s) for arm in plan["arms"] for s in plan["seeds"]}
        accounted = (set(units) - {"base"}) | (set(o["missing"]) - {"base"})
        if accounted != planned:
            odd = sorted(planned ^ accounted)[:3]
            wrong.append(f"outcomes: the plan's units, recorded or missing, differ ({', '.join(odd)})")
    if doc.get("complete") != (not o["missing"]):
        wrong.append(f"complete: recorded {doc.get('complete')!r} with missing units {o['missing']}")
    return wrong


def verify(path: Path) -> dict[str, Any]:
    """The document at ``path`` when its summary recomputes; a :class:`VerifyError` naming every
    mismatch otherwise."""
    doc = read(path)
    wrong = problems(doc)  # the summary is recomputed only from well-formed outcome lists
    wrong = wrong or differences(summary_from_outcomes(doc), doc["summary"], "summary")
    if wrong:
        shown = "; ".join(wrong[:5]) + (f"; and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        raise VerifyError(
            f"{path}: {len(wrong)} mismatch(es) between the outcome lists and the summary: {shown}"
        )
    return doc
