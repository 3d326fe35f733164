"""A study's summary, from its outcome lists alone, and the verdicts of its comparisons.

Statistics: every table uses the seeds *all* arms have finished (a partial study never
compares 3 seeds of one arm with 2 of another). An arm's pass@1 is the mean over those seeds
and the test problems, its interval the percentile bootstrap that resamples both; a paired
difference (agon − grpo) resamples the same seeds and problems for both arms (seed ``s`` of
every arm shares that seed's problem stream), so problem difficulty cancels and seed luck
stays in. With 2–3 seeds that bootstrap understates seed-to-seed variation, so each paired
difference also comes per seed, with a Student-t interval over the seeds alone.

:func:`summary_from_outcomes` reads the results document's ``outcomes`` and its ``plan``
(which arms read their own draft in two-stage, which comparisons to pair); a document
recorded before ``agon study`` (``bench: replicate_cpu``) has neither, and gets the
comparisons and two-stage methods those studies ran with (:data:`agon_env.upgrade.PRE_STUDY`).

An outcome is 0, 1 or ``None``: the verifier gave that answer no verdict. By the one rule of
:func:`agon_env.stats.judged` it is in no mean, difference or count here (a paired cell with an
unjudged side is left out of both arms), and each arm's row counts them as ``unjudged``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from agon_env import metric_names as M
from agon_env.json_value import JSONRecord
from agon_env.metric_names import CHALLENGE_CHANGED_ANSWER
from agon_env.stats import Difference, least_discordant, paired_bootstrap, verdict_of
from agon_env.study.plan import unit_name
from agon_env.study.results_file import KeysOf, PairedDifference, ResultsDocument, Summary, UnitOutcome
from agon_env.upgrade import pre_study
from agon_env.vocabulary import ROLES, SEATS

CHANGED = CHALLENGE_CHANGED_ANSWER
PER_STEP = (CHANGED, M.CONVERSION, M.TIME_STEP)


def two_stage_methods(doc: ResultsDocument) -> dict[str, str]:
    """Arm -> its two-stage method family (``cascade`` or ``self-cascade``)."""
    arms, plan = doc["outcomes"]["arms"], doc.get("plan", {})
    old = pre_study(plan)
    recorded = old.two_stage if old is not None else plan.get("two_stage") or {}
    return {arm: recorded.get(arm, "cascade") for arm in arms}


def comparisons(doc: ResultsDocument) -> list[tuple[str, str]]:
    """The pairs the summary reports: the plan's primary then exploratory ones (recorded studies:
    :data:`agon_env.upgrade.PRE_STUDY`), then any added at report time (``agon study report --compare``)."""
    plan = doc.get("plan", {})
    old = pre_study(plan)
    listed = (
        list(old.comparisons) if old is not None else [*plan["comparisons"], *plan.get("exploratory", [])]
    )
    listed += doc.get("added_comparisons", [])
    return list(dict.fromkeys(tuple(p) for p in listed))


NOT_SHOWN = "difference not shown"
"""What the rule says when neither a difference nor an equivalence is shown: not "no difference"."""


def cannot_tell(diff: PairedDifference, confidence: float = 0.95) -> str | None:
    """Why the data of a paired difference cannot carry a verdict, or None: both arms at floor or
    ceiling on every problem and seed (every resampled interval collapses to [0, 0], which is no
    evidence of equivalence), or fewer discordant pairs than an exact two-sided test at
    ``confidence`` needs to reject at all (:func:`agon_env.stats.least_discordant`). A summary
    recorded before the counts were kept (no ``discordant``) is not checked."""
    counts = diff.get("discordant")
    if counts is None:
        return None
    floor = diff.get("floor")
    if floor is not None:
        return f"cannot tell: both arms at {100 * floor:g} % on every problem and seed"
    n, need = counts["first_only"] + counts["second_only"], least_discordant(confidence)
    if n < need:
        return (
            f"cannot tell: {n} discordant pair(s), a two-sided test at {100 * confidence:g} % "
            f"needs at least {need}"
        )
    return None


def verdict(
    diff: PairedDifference,
    first: str,
    every_seed: bool = True,
    margin: float | None = None,
    confidence: float = 0.95,
    not_shown: str = NOT_SHOWN,
) -> str:
    """The decision rule of a paired difference (docs/results/preregistration-2.md §4): ``first``
    is better when the bootstrap interval lies above 0 *and* (``every_seed``) every seed's
    difference is above 0, worse when both lie below. Otherwise, with an equivalence ``margin``,
    the two are equivalent when the interval lies inside ±margin (two one-sided tests at the
    interval's level); without one nothing is claimed: "difference not shown", never "≈ 0". The
    every-seed half is the guard against one lucky interval among several comparisons (no
    multiplicity correction). Data that cannot tell (:func:`cannot_tell`) gets no verdict at all."""
    unable = cannot_tell(diff, confidence)
    if unable is not None:
        return unable
    per = list(diff["per_seed"].values())
    by_interval = verdict_of(diff["low"], diff["high"], "better", "worse")
    agree = {"better": lambda v: v > 0, "worse": lambda v: v < 0}
    if by_interval in agree and per and (not every_seed or all(map(agree[by_interval], per))):
        return f"{first} {by_interval}"
    if margin is not None and -margin < diff["low"] and diff["high"] < margin:
        return f"equivalent within ±{100 * margin:g} pp"
    return not_shown


def _mean(values: Iterable[float | None]) -> float | None:
    """The mean of the judged values (``None``: unjudged, left out); ``None`` when none is judged."""
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def _judged_pairs(x: Sequence[float | None], y: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """The cells of two paired outcome lists that are judged on both sides, as two lists."""
    cells = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    return [a for a, _ in cells], [b for _, b in cells]


def _any_judged(grid: Sequence[Sequence[float | None]]) -> bool:
    return any(v is not None for row in grid for v in row)


def discordant(xs: Sequence[Sequence[float | None]], ys: Sequence[Sequence[float | None]]) -> JSONRecord:
    """The pairs that carry a paired difference's information: (seed, problem) cells where the
    first arm scores more (``first_only``) or less (``second_only``); a standalone cell (the mean
    of two adapters) counts once either way. ``floor``: the one value both arms have on every
    cell, when they do (0 or 1: floor or ceiling), else None."""
    cells = [(a, b) for x, y in zip(xs, ys, strict=True) for a, b in zip(*_judged_pairs(x, y), strict=True)]
    values = {v for a, b in cells for v in (a, b)}
    first_only, second_only = sum(a > b for a, b in cells), sum(a < b for a, b in cells)
    return {
        "discordant": {"first_only": first_only, "second_only": second_only},
        "floor": next(iter(values)) if len(values) == 1 else None,
    }


def second_turn_net(turn: dict[str, int]) -> float:
    """What a two-stage method's second turn did to pass@1 against the drafts it read: wrong drafts
    fixed minus right drafts lost, over every draft (the probe's gap, on trained models)."""
    lost = turn["right_drafts"] - turn["kept"]
    return (turn["fixed"] - lost) / max(1, turn["right_drafts"] + turn["wrong_drafts"])


TRAINING_RATES = (
    M.CONVERSION,
    *(M.key(M.WIN, seat) for seat in SEATS),
    M.DRAFT_UNUSABLE,
    M.SUMMARY_LEAK,
    M.KL,
    CHANGED,
    *(M.key(quantity, role) for quantity in (M.ACC, M.FORMAT, M.LEN_TOKENS) for role in ROLES),
    M.GROUPS_DROPPED,
    M.TIME_STEP,
    *(M.key(M.PROMPT_TOKENS, role) for role in ROLES),
    M.LATENT_TOKENS,
    M.LATENT_BYTES,
    M.LATENT_EMPTY,
)


def _keys(run: UnitOutcome, family: str, method: str) -> list[str]:
    """The evaluated methods behind a reported one (both adapters for ``standalone``; for
    ``two-stage``, the validation-chosen cascade or, ``family`` = ``self-cascade``, the arm's
    self-cascade)."""
    o = run["outcomes"]
    if method == "standalone":
        return [k for k in o if k.startswith("standalone:")]
    if method == "two-stage":
        keys = (
            [run["chosen_cascade"]] if family == "cascade" else [k for k in o if k.startswith(f"{family}:")]
        )
        return [k for k in keys if k]
    return [method] if method in o else []


def second_turn(runs: Sequence[UnitOutcome], keys_of: KeysOf) -> JSONRecord | None:
    """What the second turn did with its drafts, pooled over runs: kept right ones, fixed wrong ones."""
    kept = right = fixed = wrong = 0
    for run in runs:
        for k in keys_of(run):
            if k not in run.get("first_outcomes", {}):
                return None
            firsts, finals = _judged_pairs(run["first_outcomes"][k], run["outcomes"][k])
            for first, final in zip(firsts, finals, strict=True):
                right, kept = right + first, kept + (first and final)
                wrong, fixed = wrong + (not first), fixed + (not first and final)
    if not right + wrong:
        return None
    return {"right_drafts": right, "kept": kept, "wrong_drafts": wrong, "fixed": fixed}


def second_turn_change(
    runs: Sequence[UnitOutcome], keys_of: KeysOf, confidence: float = 0.95
) -> Difference | None:
    """:func:`second_turn_net` with its interval: the two-stage outcomes against the drafts they
    read, paired by run and problem (``stats.paired_bootstrap``), or None without first outcomes.
    Over runs of equal length its mean is the pooled net."""
    finals, firsts = [], []
    for run in runs:
        for k in keys_of(run):
            if k not in run.get("first_outcomes", {}):
                return None
            finals.append(run["outcomes"][k])
            firsts.append(run["first_outcomes"][k])
    judged = any(_judged_pairs(x, y)[0] for x, y in zip(finals, firsts, strict=True))
    return paired_bootstrap(finals, firsts, confidence) if judged else None


def second_turn_runs(doc: ResultsDocument) -> dict[str, tuple[list[UnitOutcome], KeysOf]]:
    """Each two-stage method the second-turn table reports: its runs (compared seeds) and the
    outcome keys of its second turn in a run."""
    families = two_stage_methods(doc)
    out: dict[str, tuple[list[UnitOutcome], KeysOf]] = {
        arm: (list(seeds.values()), lambda r, f=families[arm]: _keys(r, f, "two-stage"))
        for arm, seeds in compared(doc["outcomes"]["arms"]).items()
    }
    base = doc["outcomes"].get("base")
    if base and "moa" in base.get("first_outcomes", {}):
        out["base (MoA)"] = ([base], lambda r: ["moa"])
    return out


def cell(run: UnitOutcome, family: str, method: str) -> tuple[list[float | None], float] | None:
    """One seed's per-problem outcome (a 0/1 list, or the adapters' mean over those judged; None
    where none was) for a reported method (``family``: the arm's two-stage method)."""
    o, lengths = run["outcomes"], run["mean_length"]
    keys = _keys(run, family, method)
    if not keys:
        return None
    values = [_mean(o[k][p] for k in keys) for p in range(len(o[keys[0]]))]
    return values, statistics.fmean(lengths[k] for k in keys)


def compared_seeds(arms: dict[str, dict[str, UnitOutcome]]) -> list[str]:
    """The seeds every arm has finished: the only ones any table compares."""
    sets = [set(seeds) for seeds in arms.values()]
    return sorted(set.intersection(*sets), key=int) if sets else []


def compared(arms: dict[str, dict[str, UnitOutcome]]) -> dict[str, dict[str, UnitOutcome]]:
    """Each arm's runs restricted to :func:`compared_seeds`, in seed order."""
    used = compared_seeds(arms)
    return {arm: {s: seeds[s] for s in used} for arm, seeds in arms.items()}


def alike(runs: Sequence[UnitOutcome]) -> JSONRecord | None:
    """How alike a pair's two adapters are on test, pooled over runs: problems both get wrong,
    against what two independent adapters with the same accuracies would share."""
    from agon_env.stats import complementarity

    n = both = one = 0
    expected = 0.0
    for run in runs:
        o = run["outcomes"]
        if "standalone:agent_a" not in o or "standalone:agent_b" not in o:
            return None
        c = complementarity(o["standalone:agent_a"], o["standalone:agent_b"])
        if not c.n:
            continue
        a, b = _judged_pairs(o["standalone:agent_a"], o["standalone:agent_b"])
        n, both, one = n + c.n, both + c.both_wrong, one + c.exactly_one_wrong
        expected += c.n * (1 - statistics.fmean(a)) * (1 - statistics.fmean(b))
    if not n:
        return None
    out = {"problems": n, "both_wrong": both, "both_wrong_if_independent": expected, "exactly_one_wrong": one}
    # How often the two adapters' standalone answers differ (eval's complementarity.adapters.
    # answers_differ): only evaluations since issue #22 record it, so only when every run has it.
    differ = [run.get("answers_differ") for run in runs]
    if all(d is not None for d in differ):
        out["answers_differ"] = {k: sum(d[k] for d in differ) for k in ("differ", "both_answered")}
    return out


def rule(doc: ResultsDocument) -> JSONRecord:
    """The decision rule that decides: the registered plan's when the study was registered (a
    results file's own ``plan`` can be edited alone), else the plan's, else none recorded."""
    registration = doc.get("registration") or {}
    return (registration.get("plan") or doc.get("plan", {})).get("decision", {})


def coverage(doc: ResultsDocument) -> float:
    """Every interval's coverage: the decision rule's (:func:`rule`), else 95 %."""
    return float(rule(doc).get("confidence", 0.95))


def summary_from_outcomes(doc: ResultsDocument, confidence: float | None = None) -> Summary:
    """Everything the tables show, from the outcome lists alone, on the seeds every arm finished
    (``confidence``: :func:`coverage` unless given)."""
    if confidence is None:
        confidence = coverage(doc)
    from agon_env.stats import t_interval

    every, families = doc["outcomes"]["arms"], two_stage_methods(doc)
    used, arms = compared_seeds(every), compared(every)
    left_out = sorted(unit_name(arm, s) for arm, seeds in every.items() for s in seeds if s not in used)
    rows: JSONRecord = {}
    for arm, seeds in arms.items():
        methods = [*sorted({m for run in seeds.values() for m in run["outcomes"]}), "standalone", "two-stage"]
        rows[arm] = {}
        for m in methods:
            got = {s: c for s, run in seeds.items() if (c := cell(run, families[arm], m)) is not None}
            if not got:
                continue
            grid = [c[0] for c in got.values()]
            if not _any_judged(grid):
                continue
            iv = paired_bootstrap(grid, [[0.0] * len(g) for g in grid], confidence)
            rows[arm][m] = {
                "per_seed": {s: _mean(c[0]) for s, c in got.items()},
                "mean": iv.mean,
                "interval": [iv.low, iv.high],
                "mean_length": statistics.fmean(c[1] for c in got.values()),
                "seeds": len(got),
                "unjudged": sum(v is None for g in grid for v in g),
            }
    paired: JSONRecord = {}
    for arm, other in comparisons(doc):
        for m in ("standalone", "two-stage"):
            if arm not in arms or other not in arms:
                continue
            cells = {
                s: (cell(arms[arm][s], families[arm], m), cell(arms[other][s], families[other], m))
                for s in used
            }
            cells = {s: (x[0], y[0]) for s, (x, y) in cells.items() if x is not None and y is not None}
            judged = {s: _judged_pairs(x, y) for s, (x, y) in cells.items()}
            if not any(x for x, _ in judged.values()):
                continue
            xs, ys = [x for x, _ in cells.values()], [y for _, y in cells.values()]
            diff = paired_bootstrap(xs, ys, confidence)
            per_seed = {s: statistics.fmean(x) - statistics.fmean(y) for s, (x, y) in judged.items() if x}
            over_seeds = t_interval(list(per_seed.values()), confidence, bounds=(-1.0, 1.0))
            paired[f"{arm} − {other}, {m}"] = diff.to_dict() | {
                "seeds_used": list(cells),
                "per_seed": per_seed,
                "t_interval_over_seeds": None if over_seeds is None else list(over_seeds),
                **discordant(xs, ys),
            }
    base = doc["outcomes"].get("base")
    base_rows = {}
    if base:
        for m, o in base["outcomes"].items():
            if not _any_judged([o]):
                continue
            iv = paired_bootstrap([o], [[0] * len(o)], confidence)
            length = base["mean_length"][m]
            base_rows[m] = {"mean": iv.mean, "interval": [iv.low, iv.high], "mean_length": length}
    turns = {name: second_turn(runs, keys_of) for name, (runs, keys_of) in second_turn_runs(doc).items()}
    pairs = {arm: alike(list(seeds.values())) for arm, seeds in arms.items()}
    return {
        "seeds": used,
        "left_out": left_out,
        "base": base_rows,
        "arms": rows,
        "paired": paired,
        "second_turn": {k: v for k, v in turns.items() if v is not None},
        "alike": {k: v for k, v in pairs.items() if v is not None},
        "confidence": confidence,
    }
