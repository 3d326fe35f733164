"""The replication's results as data, and the tables and figure generated from that data.

``build`` reads the finished units of ``benchmarks/replicate_cpu.py`` (each unit's
``eval.json`` and ``metrics.jsonl``) into one JSON document: the task, level, model and
training settings; the test and validation problem ids with a sha256 of each normalised
prompt; for every arm, seed and method the list of 0/1 outcomes per test problem in the
test-id order; and a ``summary`` computed from those lists only (so
:func:`summary_from_outcomes` on the saved file gives it back).
``replication_tables.write`` saves it and renders its tables and figure.

Statistics: every table uses the seeds *all* arms have finished (a partial run never
compares 3 seeds of one arm with 2 of another). An arm's pass@1 is the mean over those seeds
and the test problems, its interval the percentile bootstrap that resamples both; a paired
difference (agon − grpo) resamples the same seeds and problems for both arms (seed ``s`` of
every arm shares that seed's problem stream), so problem difficulty cancels and seed luck
stays in. With 2–3 seeds that bootstrap understates seed-to-seed variation, so each paired
difference also comes per seed, with a Student-t interval over the seeds alone.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replication_plans import two_stage  # the arms' table; a sibling file

from agon_env.evaluation.evaluate import outcomes  # no torch: the parent process stays light
from agon_env.metric_names import CHALLENGE_CHANGED_ANSWER
from agon_env.run_folder import EVAL_REPORT, read_metrics
from agon_env.stats import Difference, paired_bootstrap, verdict_of
from agon_env.upgrade import method_id

CHANGED = CHALLENGE_CHANGED_ANSWER
LEGACY_CHANGED = "divergence/answer_disagreement"
"""What runs before issue #22 logged instead: the same comparison, but with a missing answer on
one side counted as a change (both missing: no change) and unusable drafts included."""
PER_STEP = (CHANGED, "conversion_rate", "time/step")
PAIRS = (
    ("agon", "grpo"),
    ("coop", "grpo"),
    ("agon", "coop"),
    ("hidden-draft", "grpo"),
    ("hidden-draft", "agon"),
    ("agon-redacted", "agon"),
    ("agon-latent", "agon"),
    ("agon-none", "agon"),
    ("agon-latent", "agon-none"),
)
"""Paired differences reported: the paper's claims (agon > coop > grpo), the bonus alone (agon − coop),
what the summary's stated answer is worth (agon-redacted − agon), and what each channel is
worth against text summaries and against reading nothing (issue #25). A pair is reported once both
arms have run."""


def verdict(diff: dict[str, Any], first: str) -> str:
    """The pre-registered decision rule of a paired difference (docs/results/preregistration-2.md
    §4): ``first`` is better when the bootstrap interval lies above 0 *and* every seed's difference
    is above 0, worse when both lie below, otherwise no difference is shown. The every-seed half is
    the guard against one lucky interval among several comparisons (no multiplicity correction)."""
    per = list(diff["per_seed"].values())
    by_interval = verdict_of(diff["low"], diff["high"], "better", "worse")
    if by_interval == "better" and per and all(v > 0 for v in per):
        return f"{first} better"
    if by_interval == "worse" and per and all(v < 0 for v in per):
        return f"{first} worse"
    return "no difference shown"


def second_turn_net(turn: dict[str, int]) -> float:
    """What a two-stage method's second turn did to pass@1 against the drafts it read: wrong drafts
    fixed minus right drafts lost, over every draft (the probe's gap, on trained models)."""
    lost = turn["right_drafts"] - turn["kept"]
    return (turn["fixed"] - lost) / max(1, turn["right_drafts"] + turn["wrong_drafts"])


TRAINING_RATES = ("conversion_rate", "win_rate/agent_a", "win_rate/agent_b", "draft_unusable", "summary_leak",
                  "divergence/kl", CHANGED, "acc/drafter", "acc/challenger",
                  "format/drafter", "format/challenger", "len_tokens/drafter", "len_tokens/challenger",
                  "groups_dropped", "time/step", "prompt_tokens/drafter", "prompt_tokens/challenger",
                  "latent/tokens", "latent/bytes")  # fmt: skip


def sha(prompt: str) -> str:
    from agon_env.envs.tasks.base import normalize_prompt

    return hashlib.sha256(normalize_prompt(prompt).encode()).hexdigest()


def problems(plan: Any, difficulty: float | None) -> dict[str, Any]:
    """The test and validation problems every evaluation used, and their distance from training."""
    from agon_env.envs.tasks.base import normalize_prompt
    from agon_env.evaluation.splits import load_eval_data, training_pool

    kwargs = plan.task(difficulty)
    data = load_eval_data(plan.config().env.id, kwargs, "test", plan.test_problems, plan.val_problems, seed=0)
    pool = training_pool(plan.config().env.id, kwargs)
    train = {normalize_prompt(pool[i].prompt) for i in range(len(pool))}
    test = [data.test.task[i].prompt for i in data.test.indices]
    val = [data.validation.task[i].prompt for i in data.validation.indices]
    return {
        "test": {"ids": data.test.ids(), "prompt_sha256": [sha(p) for p in test]},
        "validation": {"ids": data.validation.ids(), "prompt_sha256": [sha(p) for p in val]},
        "test_prompts_in_training_pool": sum(normalize_prompt(p) in train for p in test),
        "test_prompts_in_validation": len(set(map(normalize_prompt, test)) & set(map(normalize_prompt, val))),
        "training_pool_size": len(pool),
    }


def _first(methods: dict[str, Any], ids: Sequence[str]) -> dict[str, list[int]]:
    """The drafts' outcomes of every two-turn method (what the second turn was handed)."""
    two = {m: v for m, v in methods.items() if v["episodes"] and len(v["episodes"][0]["turns"]) > 1}
    return {m: outcomes(v, ids, "first_correct") for m, v in two.items()}


def _training(run_dir: Path, steps: int) -> dict[str, Any]:
    rows = read_metrics(run_dir)
    window = max(1, steps // 5)

    def mean(rs: list[dict[str, Any]], key: str) -> float | None:
        vals = [r[key] for r in rs if r.get(key) is not None]
        return statistics.fmean(vals) if vals else None

    first, last = rows[:window], rows[-window:]
    # A run logged before the rename has the old metric only: keep it under its own name (flagged).
    legacy = [LEGACY_CHANGED] if any(LEGACY_CHANGED in r for r in rows) else []
    rates, per_step = (*TRAINING_RATES, *legacy), (*PER_STEP, *legacy)
    return {
        "steps": len(rows),
        "window": window,
        **{k: {"all": mean(rows, k), "first": mean(first, k), "last": mean(last, k)} for k in rates},
        "per_step": {k: [r.get(k) for r in rows] for k in per_step},
    }


def current_methods(methods: dict[str, Any]) -> dict[str, Any]:
    """``methods`` keyed by today's method names. Files written up to 35d8054 (``eval.json``s and
    ``docs/results/replication_cpu.json``) call the few-shot base ``zero-shot``; it is read as
    ``base-few-shot`` (:func:`agon_env.upgrade.method_id`)."""
    return {method_id(k): v for k, v in methods.items()}


def task_record(plan: Any, difficulty: float | None) -> dict[str, Any]:
    """The results file's ``task``: the env, the level calibration chose and any other task keywords."""
    env = plan.config().env
    extra = {"kwargs": env.kwargs} if env.kwargs else {}
    return {"env": env.id, "difficulty": difficulty, **extra}


def check_eval(report: dict[str, Any], plan: Any, difficulty: float | None, path: Path) -> None:
    """Refuse an ``eval.json`` of another level, split or size: problem ids are positions, so
    another level's ``test-86`` would silently pair with this one's."""
    data = report["data"]
    want = {"env": plan.config().env.id, "task_kwargs": plan.task(difficulty), "split": "test",
            "test_problems": plan.test_problems, "validation_problems": plan.val_problems}  # fmt: skip
    got = {k: data.get(k) for k in want}
    got["task_kwargs"] = got["task_kwargs"] or {}
    if got != want:
        raise SystemExit(f"{path} evaluated {got}, this replication needs {want}")


def collect(
    plan: Any,
    out: Path,
    difficulty: float | None,
    ids: Sequence[str],
    units: Sequence[tuple[str, int]],
    previous: dict | None = None,
) -> dict[str, Any]:
    """Per arm and seed: outcomes per method, the validation choice, lengths, training rates.

    A unit whose folder is gone but which ``previous`` (the outcomes of an earlier results file
    with the same settings) holds is taken from there: the data file is the durable record.
    """
    previous = previous or {"arms": {}, "base": None}
    arms: dict[str, dict[str, Any]] = {}
    missing = []
    for arm, seed in units:
        name = f"{arm}-seed{seed}"
        path = out / "eval" / name / EVAL_REPORT
        if not path.is_file():
            kept = previous["arms"].get(arm, {}).get(str(seed))
            if kept is not None:
                arms.setdefault(arm, {})[str(seed)] = kept
            else:
                missing.append(name)
            continue
        report = json.loads(path.read_text())
        check_eval(report, plan, difficulty, path)
        run = report["runs"][0]
        methods = current_methods(run["methods"])
        arms.setdefault(arm, {})[str(seed)] = {
            "outcomes": {m: outcomes(v, ids) for m, v in methods.items()},
            "first_outcomes": _first(methods, ids),
            "mean_length": {m: v["mean_length"] for m, v in methods.items()},
            "mean_final_length": {m: v["mean_final_length"] for m, v in methods.items()},
            "chosen_cascade": (run.get("selection") or {}).get("chosen"),
            "validation": (run.get("selection") or {}).get("validation"),
            "post_hoc_differs": (run.get("selection") or {}).get("post_hoc_differs"),
            "answers_differ": ((run.get("complementarity") or {}).get("adapters") or {}).get(
                "answers_differ"
            ),
            "training": _training(out / "runs" / name, plan.config().steps),
        }
    base_path = out / "eval" / "base" / EVAL_REPORT
    base = None
    if base_path.is_file():
        report = json.loads(base_path.read_text())
        check_eval(report, plan, difficulty, base_path)
        methods = current_methods(report["runs"][0]["methods"])
        base = {
            "outcomes": {m: outcomes(v, ids) for m, v in methods.items()},
            "first_outcomes": _first(methods, ids),
            "mean_length": {m: v["mean_length"] for m, v in methods.items()},
        }
    elif previous.get("base") is not None:
        base = previous["base"]
    else:
        missing.append("base")
    return {"arms": arms, "base": base, "missing": missing}


def _keys(run: dict[str, Any], arm: str, method: str) -> list[str]:
    """The evaluated methods behind a reported one (both adapters for ``standalone``; the
    validation-chosen cascade, or grpo's self-cascade, for ``two-stage``)."""
    o = run["outcomes"]
    if method == "standalone":
        return [k for k in o if k.startswith("standalone:")]
    if method == "two-stage":
        family = two_stage(arm)
        keys = (
            [run["chosen_cascade"]] if family == "cascade" else [k for k in o if k.startswith(f"{family}:")]
        )
        return [k for k in keys if k]
    return [method] if method in o else []


def second_turn(runs: Sequence[dict[str, Any]], keys_of: Any) -> dict[str, Any] | None:
    """What the second turn did with its drafts, pooled over runs: kept right ones, fixed wrong ones."""
    kept = right = fixed = wrong = 0
    for run in runs:
        for k in keys_of(run):
            if k not in run.get("first_outcomes", {}):
                return None
            for first, final in zip(run["first_outcomes"][k], run["outcomes"][k], strict=True):
                right, kept = right + first, kept + (first and final)
                wrong, fixed = wrong + (not first), fixed + (not first and final)
    if not right + wrong:
        return None
    return {"right_drafts": right, "kept": kept, "wrong_drafts": wrong, "fixed": fixed}


def second_turn_change(
    runs: Sequence[dict[str, Any]], keys_of: Any, confidence: float = 0.95
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
    return paired_bootstrap(finals, firsts, confidence) if finals else None


def second_turn_runs(doc: dict[str, Any]) -> dict[str, tuple[list[dict[str, Any]], Any]]:
    """Each two-stage method the second-turn table reports: its runs (compared seeds) and the
    outcome keys of its second turn in a run."""
    out: dict[str, tuple[list[dict[str, Any]], Any]] = {
        arm: (list(seeds.values()), lambda r, a=arm: _keys(r, a, "two-stage"))
        for arm, seeds in compared(doc["outcomes"]["arms"]).items()
    }
    base = doc["outcomes"].get("base")
    if base and "moa" in base.get("first_outcomes", {}):
        out["base (MoA)"] = ([base], lambda r: ["moa"])
    return out


def cell(run: dict[str, Any], arm: str, method: str) -> tuple[list[float], float] | None:
    """One seed's per-problem outcome (a 0/1 list, or the adapters' mean) for a reported method."""
    o, lengths = run["outcomes"], run["mean_length"]
    keys = _keys(run, arm, method)
    if not keys:
        return None
    values = [statistics.fmean(o[k][p] for k in keys) for p in range(len(o[keys[0]]))]
    return values, statistics.fmean(lengths[k] for k in keys)


def compared_seeds(arms: dict[str, dict[str, Any]]) -> list[str]:
    """The seeds every arm has finished: the only ones any table compares."""
    sets = [set(seeds) for seeds in arms.values()]
    return sorted(set.intersection(*sets), key=int) if sets else []


def compared(arms: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each arm's runs restricted to :func:`compared_seeds`, in seed order."""
    used = compared_seeds(arms)
    return {arm: {s: seeds[s] for s in used} for arm, seeds in arms.items()}


def alike(runs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """How alike a pair's two adapters are on test, pooled over runs: problems both get wrong,
    against what two independent adapters with the same accuracies would share."""
    from agon_env.stats import complementarity

    n = both = one = 0
    expected = 0.0
    for run in runs:
        o = run["outcomes"]
        if "standalone:agent_a" not in o or "standalone:agent_b" not in o:
            return None
        a, b = o["standalone:agent_a"], o["standalone:agent_b"]
        c = complementarity(a, b)
        n, both, one = n + c.n, both + c.both_wrong, one + c.exactly_one_wrong
        expected += c.n * (1 - statistics.fmean(a)) * (1 - statistics.fmean(b))
    if not n:
        return None
    out = {"problems": n, "both_wrong": both, "both_wrong_if_independent": expected,
           "exactly_one_wrong": one}  # fmt: skip
    # How often the two adapters' standalone answers differ (eval's complementarity.adapters.
    # answers_differ): only evaluations since issue #22 record it, so only when every run has it.
    differ = [run.get("answers_differ") for run in runs]
    if all(d is not None for d in differ):
        out["answers_differ"] = {k: sum(d[k] for d in differ) for k in ("differ", "both_answered")}
    return out


def summary_from_outcomes(doc: dict[str, Any], confidence: float = 0.95) -> dict[str, Any]:
    """Everything the tables show, from the outcome lists alone, on the seeds every arm finished."""
    from agon_env.stats import t_interval

    every = doc["outcomes"]["arms"]
    used, arms = compared_seeds(every), compared(every)
    left_out = sorted(f"{arm}-seed{s}" for arm, seeds in every.items() for s in seeds if s not in used)
    rows: dict[str, Any] = {}
    for arm, seeds in arms.items():
        methods = [*sorted({m for run in seeds.values() for m in run["outcomes"]}), "standalone", "two-stage"]
        rows[arm] = {}
        for m in methods:
            got = {s: c for s, run in seeds.items() if (c := cell(run, arm, m)) is not None}
            if not got:
                continue
            grid = [c[0] for c in got.values()]
            iv = paired_bootstrap(grid, [[0.0] * len(g) for g in grid], confidence)
            rows[arm][m] = {
                "per_seed": {s: statistics.fmean(c[0]) for s, c in got.items()},
                "mean": iv.mean,
                "interval": [iv.low, iv.high],
                "mean_length": statistics.fmean(c[1] for c in got.values()),
                "seeds": len(got),
            }
    paired: dict[str, Any] = {}
    for arm, other in PAIRS:
        for m in ("standalone", "two-stage"):
            if arm not in arms or other not in arms:
                continue
            cells = {s: (cell(arms[arm][s], arm, m), cell(arms[other][s], other, m)) for s in used}
            cells = {s: (x[0], y[0]) for s, (x, y) in cells.items() if x is not None and y is not None}
            if not cells:
                continue
            xs, ys = [x for x, _ in cells.values()], [y for _, y in cells.values()]
            diff = paired_bootstrap(xs, ys, confidence)
            per_seed = {s: statistics.fmean(x) - statistics.fmean(y) for s, (x, y) in cells.items()}
            over_seeds = t_interval(list(per_seed.values()), confidence)
            paired[f"{arm} − {other}, {m}"] = diff.to_dict() | {
                "seeds_used": list(cells),
                "per_seed": per_seed,
                "t_interval_over_seeds": None if over_seeds is None else list(over_seeds),
            }
    base = doc["outcomes"].get("base")
    base_rows = {}
    if base:
        for m, o in base["outcomes"].items():
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


def recorded(results: Path | None) -> dict[str, Any] | None:
    """An earlier results file, or None; its method names as today's (:func:`current_methods`)."""
    if results is None or not results.is_file():
        return None
    doc = json.loads(results.read_text())
    o = doc["outcomes"]
    for unit in [o.get("base"), *[r for seeds in o["arms"].values() for r in seeds.values()]]:
        for key in ("outcomes", "first_outcomes", "mean_length", "mean_final_length"):
            if unit and key in unit:
                unit[key] = current_methods(unit[key])
    return doc


def recorded_units(previous: dict[str, Any] | None) -> set[str]:
    """The units (``base``, ``ARM-seedS``) an earlier results file already holds."""
    if previous is None:
        return set()
    o = previous["outcomes"]
    names = {f"{arm}-seed{seed}" for arm, seeds in o["arms"].items() for seed in seeds}
    return names | ({"base"} if o.get("base") else set())


def build(plan: Any, out: Path, timings: dict[str, float], units: Sequence[tuple[str, int]],
          previous: dict | None, command: str = "") -> dict:  # fmt: skip
    """The results document; ``previous`` (same settings) fills in units whose folders are gone;
    ``command`` is the replicator's own command line, recorded as what produced it."""
    cal_path = out / "calibration.json"
    if cal_path.is_file():
        difficulty = json.loads(cal_path.read_text())["difficulty"]
    elif previous is not None:
        difficulty = previous["task"]["difficulty"]
    else:
        raise SystemExit(f"{out} has no calibration.json and no earlier results file: nothing to report")
    probs = problems(plan, difficulty)
    if previous is not None and previous["problems"]["test"] != probs["test"]:
        raise SystemExit("the results file's test problems differ from this level's (another problem "
                         "seed or task version): the outcomes cannot pair; use other --results")  # fmt: skip
    measured = dict(previous["calibration"]["measured"]) if previous else {}
    for d in sorted((out / "calibration").glob("d*/eval.json")):  # every level measured, in band or not
        r = current_methods(json.loads(d.read_text())["runs"][0]["methods"])["base-few-shot"]["pass@1"]
        measured[d.parent.name[1:]] = {"successes": r["successes"], "trials": r["trials"], "rate": r["rate"]}
    kept = previous and previous["outcomes"]
    doc: dict[str, Any] = {
        "bench": "replicate_cpu",
        "command": command,
        "task": task_record(plan, difficulty),
        "model": plan.config().model.name,
        "plan": plan.record(),
        "calibration": {"split": "validation", "measured": measured, "chosen": difficulty},
        "problems": probs,
        "outcomes": collect(plan, out, difficulty, probs["test"]["ids"], units, kept),
    }
    doc["summary"] = summary_from_outcomes(doc)
    doc["complete"] = not doc["outcomes"]["missing"]
    doc["stage_seconds"] = timings
    return doc
