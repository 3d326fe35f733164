"""Whether a study's units did what comparing them assumes: the notes under a report's header.

A study can run to its last step and report ordinary verdicts on arms that never trained (every
GRPO group dropped at every step: no reward variance, so no adapter moved), on samples that all
ran to the token cap (cut before any answer), or against a base that solves nothing. Each note
is read from the results document alone, so a re-rendered file says it too; a healthy study, or
a file recorded before a unit counted what a note needs, gets none.
"""

from __future__ import annotations

from collections.abc import Callable

from agon_env import metric_names as M
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.study.plan import unit_name
from agon_env.study.results_file import ResultsDocument


def never_updated(doc: ResultsDocument) -> list[str]:
    """The arms (and the units of other arms) whose every group was dropped at every step: a
    unit's mean ``groups_dropped`` over its steps is 1 only when each step's is."""
    arms, units = [], []
    for arm, seeds in doc["outcomes"]["arms"].items():
        stuck = [
            s
            for s, r in seeds.items()
            if ((r.get("training") or {}).get(M.GROUPS_DROPPED) or {}).get("all") == 1.0
        ]
        if stuck and len(stuck) == len(seeds):
            arms.append(arm)
        else:
            units += [unit_name(arm, s) for s in stuck]
    why = "every group was dropped (its samples all earned one reward, so GRPO had no variance to learn from)"
    notes = []
    if arms:
        who = (
            "No arm ever updated"
            if len(arms) == len(doc["outcomes"]["arms"])
            else (f"{', '.join(arms)} never updated")
        )
        notes.append(
            f"{who}: at every step of every unit {why}; "
            f"{'each is' if len(arms) > 1 else 'it is'} compared as the untrained model it started as."
        )
    if units:
        notes.append(f"{', '.join(units)} never updated: at every step {why}.")
    return notes


def _cap(doc: ResultsDocument, arm: str | None) -> JSONValue:
    """The token cap a unit sampled at: its arm's own (``arm_settings``), else the plan's."""
    plan = doc["plan"]
    own = (plan.get("arm_settings") or {}).get(arm) if arm is not None else None
    return (own or plan).get("max_new_tokens")


def token_cap(doc: ResultsDocument) -> list[str]:
    """Per unit, the share of its evaluation's turns cut at the token cap (units that counted
    them: ``token_cap`` and ``turns`` per method; none cut: no note)."""
    o = doc["outcomes"]
    named = [("base", None, o.get("base"))] if o.get("base") else []
    named += [(unit_name(arm, s), arm, r) for arm, seeds in o["arms"].items() for s, r in seeds.items()]
    cut = []
    for name, arm, record in named:
        counts, turns = record.get("token_cap") or {}, record.get("turns") or {}
        known = [m for m, c in counts.items() if c is not None and turns.get(m)]
        hit, total = sum(counts[m] for m in known), sum(turns[m] for m in known)
        if hit:
            cut.append(f"{name} {100 * hit / total:.0f} % ({hit} of {total}, cap {_cap(doc, arm)})")
    if not cut:
        return []
    return [
        "Evaluation turns cut at the token cap (max_new_tokens), per unit: " + "; ".join(cut) + ". A cut "
        "turn ends before its answer, so its rate bounds what the unit can score."
    ]


def base_solves_nothing(doc: ResultsDocument) -> list[str]:
    """The untrained base right on no test problem with any of its methods."""
    base = doc["outcomes"].get("base")
    if not base or not base["outcomes"] or any(any(v) for v in base["outcomes"].values()):
        return []
    n = len(doc["problems"]["test"]["ids"])
    return [
        f"The untrained base solved none of the {n} test problems ({', '.join(base['outcomes'])}): the task "
        "may be beyond the model or its answer format unmet; a trained arm's gain from nothing is no "
        "comparison of methods."
    ]


NOTES: tuple[Callable[[JSONRecord], list[str]], ...] = (never_updated, token_cap, base_solves_nothing)
"""Every check, in the order the report says its notes."""


def notes(doc: ResultsDocument) -> list[str]:
    """The report's section of notes (empty when there is nothing to say)."""
    said = [line for check in NOTES for line in check(doc)]
    return ["Read the tables with these in mind:", "", *(f"- {line}" for line in said)] if said else []
