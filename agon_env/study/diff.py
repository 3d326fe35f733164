"""``agon study diff A B``: two results files compared outcome by outcome.

Two runs of one plan claim to agree (a resumed study and an uninterrupted one, the Ray launcher
and the local one) when every unit's 0/1 outcome per test problem is the same, for the final
answers and for the drafts. :func:`differences` names each disagreement on one line: a unit or a
method one file has and the other lacks, another list of test problems, and per unit and method
the problems whose outcomes differ. Summaries, timings and hashes are not compared: they follow
from the outcome lists (``agon study verify``) or differ between honest runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agon_env.errors import UnknownName
from agon_env.json_value import JSONRecord
from agon_env.study.plan import unit_name
from agon_env.study.results_file import ResultsDocument

SHOWN = 40
"""At most this many differences are printed; the rest are counted."""

_LISTS = (("outcomes", ""), ("first_outcomes", " (drafts)"))
"""The outcome lists a unit holds, and how a difference in each is named."""


def units(doc: ResultsDocument) -> dict[str, JSONRecord]:
    """A results document's evaluated units by name (``agon-seed0``, ..., ``base``)."""
    o = doc["outcomes"]
    named = {unit_name(arm, seed): r for arm, seeds in o["arms"].items() for seed, r in seeds.items()}
    if o.get("base"):
        named["base"] = o["base"]
    return named


def _absent(what: str, a: Iterable[str], b: Iterable[str]) -> list[str]:
    a, b = set(a), set(b)
    return [f"{what} {n}: only in A" for n in sorted(a - b)] + [
        f"{what} {n}: only in B" for n in sorted(b - a)
    ]


def differences(a: ResultsDocument, b: ResultsDocument, only: Sequence[str] = ()) -> list[str]:
    """One line per disagreement of results documents ``a`` and ``b`` (empty: they agree);
    ``only``: compare these units alone."""
    ids_a, ids_b = a["problems"]["test"]["ids"], b["problems"]["test"]["ids"]
    if ids_a != ids_b:
        return [
            f"test problems differ: A has {len(ids_a)}, B {len(ids_b)} (first {ids_a[:1]} vs {ids_b[:1]})"
        ]
    ua, ub = units(a), units(b)
    if only:
        unknown = [u for u in only if u not in ua and u not in ub]
        if unknown:
            raise UnknownName(f"--unit {unknown[0]!r}: no such unit in either file ({', '.join(sorted(ua))})")
        ua, ub = {u: ua[u] for u in only if u in ua}, {u: ub[u] for u in only if u in ub}
    lines = _absent("unit", ua, ub)
    for name in sorted(ua.keys() & ub.keys()):
        for key, label in _LISTS:
            ma, mb = ua[name].get(key, {}), ub[name].get(key, {})
            lines += _absent(f"{name} method{label}", ma, mb)
            for method in sorted(ma.keys() & mb.keys()):
                flipped = [i for i, x, y in zip(ids_a, ma[method], mb[method], strict=True) if x != y]
                if flipped:
                    shown = ", ".join(flipped[:5]) + (" ..." if len(flipped) > 5 else "")
                    lines.append(
                        f"{name} {method}{label}: {len(flipped)} of {len(ids_a)} outcomes differ ({shown})"
                    )
        la, lb = ua[name].get("mean_length", {}), ub[name].get("mean_length", {})
        for method in sorted(la.keys() & lb.keys()):
            if la[method] != lb[method]:  # one computation on the same completions: equal to the bit
                lines.append(f"{name} {method}: mean length {la[method]:.2f} vs {lb[method]:.2f} tokens")
    return lines


def render(lines: Sequence[str], limit: int = SHOWN) -> str:
    """The differences as printed: at most ``limit`` lines, then how many more."""
    more = [f"... and {len(lines) - limit} more differences"] if len(lines) > limit else []
    return "\n".join([*lines[:limit], *more])
