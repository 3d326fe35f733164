"""``agon study diff A B``: two results files compared outcome by outcome.

The question a user asks after a Ray run, a resumed run or a run on another machine: did every
unit score every test problem the same, and sample the same completions? :func:`diff` answers
with one line per difference, named by unit, method and problem, and nothing when the two agree.
What is compared: the test problems (ids and prompt hashes), which units each file holds, and per
unit and method the final and first-turn outcome lists and the completions' mean lengths (the
tiny model's outcomes are all 0, so equal lengths are what tell equal samples apart). Timings,
paths and the summary (recomputed from the outcomes by ``agon study verify``) are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agon_env.study.plan import unit_name
from agon_env.study.verify import read

OUTCOME_KINDS = ("outcomes", "first_outcomes")
"""Per-problem 0/1 lists, compared problem by problem."""
LENGTH_KINDS = ("mean_length", "mean_final_length")
"""Per-method completion lengths, compared as numbers."""


def _units(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    o = doc["outcomes"]
    units = {unit_name(arm, s): r for arm, seeds in o["arms"].items() for s, r in seeds.items()}
    if o.get("base"):
        units["base"] = o["base"]
    return units


def _unit(name: str, a: Mapping[str, Any], b: Mapping[str, Any], ids: list[str]) -> Iterator[str]:
    for kind in OUTCOME_KINDS:
        ma, mb = a.get(kind) or {}, b.get(kind) or {}
        for m in sorted(set(ma) ^ set(mb)):
            yield f"{name} {kind} {m}: only in {'A' if m in ma else 'B'}"
        for m in sorted(set(ma) & set(mb)):
            if len(ma[m]) != len(mb[m]):
                yield f"{name} {kind} {m}: {len(ma[m])} outcomes in A, {len(mb[m])} in B"
                continue
            pairs = enumerate(zip(ma[m], mb[m], strict=True))
            flipped = [ids[i] if i < len(ids) else str(i) for i, (x, y) in pairs if x != y]
            if flipped:
                shown = ", ".join(flipped[:5]) + (f" and {len(flipped) - 5} more" if len(flipped) > 5 else "")
                yield f"{name} {kind} {m}: {len(flipped)} problem(s) differ ({shown})"
    for kind in LENGTH_KINDS:
        ma, mb = a.get(kind) or {}, b.get(kind) or {}
        for m in sorted(set(ma) & set(mb)):
            if ma[m] != mb[m]:
                yield f"{name} {kind} {m}: {ma[m]!r} in A, {mb[m]!r} in B (other completions sampled)"


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Every difference between two results documents, one line each (``[]``: they agree)."""
    out: list[str] = []
    ta, tb = a["problems"]["test"], b["problems"]["test"]
    if ta["ids"] != tb["ids"]:
        out.append(f"test problems: {len(ta['ids'])} ids in A, {len(tb['ids'])} in B, not the same list")
    elif ta.get("prompt_sha256") != tb.get("prompt_sha256"):
        out.append("test problems: the same ids with other prompts")
    ua, ub = _units(a), _units(b)
    out += [f"{u}: only in {'A' if u in ua else 'B'}" for u in sorted(set(ua) ^ set(ub))]
    for name in sorted(set(ua) & set(ub)):
        out.extend(_unit(name, ua[name], ub[name], list(ta["ids"])))
    return out


def diff_files(a: Path, b: Path) -> list[str]:
    """:func:`diff` of two results files (method names upgraded as ``verify`` reads them)."""
    return diff(read(a), read(b))
