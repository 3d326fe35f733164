"""A study's results document: its finished units read into one JSON file.

:func:`build` reads every finished unit (its ``eval.json``, ``unit.json`` and the run's
``metrics.jsonl``) into: the task and calibration; the plan as it resolves and its hash; the
test and validation problem ids with a sha256 of each normalised prompt; for every arm, seed
and method the 0/1 outcome per test problem in the test-id order, the verifier's score errors
and time-outs, and when the unit's results were written; and a ``summary`` computed from the
outcome lists alone (:func:`agon_env.study.analysis.summary_from_outcomes`, which
``agon study verify`` reruns).
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from agon_env.config import TrainConfig
from agon_env.errors import InputError
from agon_env.evaluation.evaluate import outcomes  # no torch: the study's process stays light
from agon_env.evaluation.report_file import EvalReport, read_eval_report
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import EVAL_REPORT, read_metrics
from agon_env.study.analysis import PER_STEP, TRAINING_RATES, summary_from_outcomes
from agon_env.study.calibration import read_calibration
from agon_env.study.folder import FAILED, Registration, StudyFolder, read_unit_record
from agon_env.study.plan import StudyPlan, two_stage, unit_name
from agon_env.study.results_file import Outcomes, ResultsDocument, UnitOutcome
from agon_env.upgrade import old_metrics

__all__ = ["FAILED", "build", "collect", "plan_record", "problems", "training", "unit_record"]


def sha(prompt: str) -> str:
    from agon_env.envs.tasks.base import normalize_prompt

    return hashlib.sha256(normalize_prompt(prompt).encode()).hexdigest()


def task_kwargs(plan: StudyPlan, task: JSONRecord) -> JSONRecord:
    """Every unit's task keywords: the plan's, with the calibrated one on top."""
    return {**plan.base_config().env.kwargs, **task}


def problems(plan: StudyPlan, task: JSONRecord) -> JSONRecord:
    """The test and validation problems every evaluation used, and their distance from training."""
    from agon_env.envs.tasks.base import normalize_prompt
    from agon_env.evaluation.splits import load_eval_data, training_pool

    env, kwargs, e = plan.base_config().env.id, task_kwargs(plan, task), plan.evaluation
    data = load_eval_data(env, kwargs, "test", e.test_problems, e.val_problems, seed=0)
    pool = training_pool(env, kwargs)
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


def _first(methods: JSONRecord, ids: Sequence[str]) -> dict[str, list[int]]:
    """The drafts' outcomes of every two-turn method (what the second turn was handed)."""
    two = {m: v for m, v in methods.items() if v["episodes"] and len(v["episodes"][0]["turns"]) > 1}
    return {m: outcomes(v, ids, "first_correct") for m, v in two.items()}


def training(run_dir: Path, steps: int) -> JSONRecord:
    """A run's training rates: over all steps, the first and the last fifth, and a few per step."""
    rows = read_metrics(run_dir)
    window = max(1, steps // 5)

    def mean(rs: list[JSONRecord], key: str) -> float | None:
        vals = [r[key] for r in rs if r.get(key) is not None]
        return statistics.fmean(vals) if vals else None

    first, last = rows[:window], rows[-window:]
    # A run logged before a rename has the old metric: keep it under its own name (flagged).
    legacy = old_metrics(rows)
    rates, per_step = (*TRAINING_RATES, *legacy), (*PER_STEP, *legacy)
    return {
        "steps": len(rows),
        "window": window,
        **{k: {"all": mean(rows, k), "first": mean(first, k), "last": mean(last, k)} for k in rates},
        "per_step": {k: [r.get(k) for r in rows] for k in per_step},
    }


def check_eval(report: EvalReport, plan: StudyPlan, task: JSONRecord, path: Path) -> None:
    """Refuse an ``eval.json`` of another task, split or size: problem ids are positions, so
    another level's ``test-86`` would silently pair with this one's."""
    data, e = report.data, plan.evaluation
    want = {
        "env": plan.base_config().env.id,
        "task_kwargs": task_kwargs(plan, task),
        "split": "test",
        "test_problems": e.test_problems,
        "validation_problems": e.val_problems,
    }
    got = {k: data.get(k) for k in want}
    got["task_kwargs"] = got["task_kwargs"] or {}
    if got != want:
        raise InputError(f"{path} evaluated {got}, this study needs {want}")


def written_at(eval_dir: Path) -> str:
    """When the unit's results were written (its ``unit.json``, else its ``eval.json``'s mtime)."""
    stamp = read_unit_record(eval_dir)
    if stamp is not None and stamp.written_at is not None:
        return stamp.written_at
    mtime = (eval_dir / EVAL_REPORT).stat().st_mtime
    return datetime.fromtimestamp(mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def started_at(eval_dir: Path) -> str | None:
    """When the unit started (its ``unit.json``; None: written before units recorded it)."""
    stamp = read_unit_record(eval_dir)
    return None if stamp is None else stamp.started_at


def unit_record(report: EvalReport, ids: Sequence[str], eval_dir: Path) -> UnitOutcome:
    """One evaluated unit: outcomes and draft outcomes per method, lengths, verifier failures."""
    run = report.runs[0]
    methods = run.methods
    return {
        "outcomes": {m: outcomes(v, ids) for m, v in methods.items()},
        "first_outcomes": _first(methods, ids),
        "mean_length": {m: v["mean_length"] for m, v in methods.items()},
        "mean_final_length": {m: v["mean_final_length"] for m, v in methods.items()},
        # None where the evaluation did not count them: the report says "unknown", never 0
        "score_errors": {m: v.get("score_errors") for m, v in methods.items()},
        "score_timeouts": {m: v.get("score_timeouts") for m, v in methods.items()},
        "turns": {m: v.get("turns") for m, v in methods.items()},
        "token_cap": {m: v.get("token_cap") for m, v in methods.items()},
        # What the unit sampled at, as its run resolved it (each adapter at its own temperature),
        # not the plan's base config: eval.json's settings come from the run's resolved.yaml.
        "settings": run.record.get("settings"),
        "started_at": started_at(eval_dir),
        "written_at": written_at(eval_dir),
    }


def collect(plan: StudyPlan, out: Path, task: JSONRecord, ids: Sequence[str]) -> Outcomes:
    """Per arm and seed: outcomes per method, the validation choice, lengths, training rates."""
    folder = StudyFolder(out)
    arms: dict[str, dict[str, UnitOutcome]] = {}
    missing = []
    for seed in plan.seeds:  # seed-major, as the units run: each finished seed compares every arm
        for arm in plan.arms:
            name = unit_name(arm, seed)
            path = folder.eval_report(name)
            if not path.is_file():
                missing.append(name)
                continue
            report = read_eval_report(path)
            check_eval(report, plan, task, path)
            run = report.runs[0]
            selection = run.selection
            steps = plan.unit_config(arm, seed).steps
            arms.setdefault(arm, {})[str(seed)] = {
                **unit_record(report, ids, path.parent),
                "chosen_cascade": selection.get("chosen"),
                "validation": selection.get("validation"),
                "post_hoc_differs": selection.get("post_hoc_differs"),
                "answers_differ": ((run.record.get("complementarity") or {}).get("adapters") or {}).get(
                    "answers_differ"
                ),
                "training": training(folder.run(name).path, steps),
            }
    arms = {arm: arms[arm] for arm in plan.arms if arm in arms}
    base = None
    base_path = folder.eval_report("base")
    if base_path.is_file():
        report = read_eval_report(base_path)
        check_eval(report, plan, task, base_path)
        base = unit_record(report, ids, base_path.parent)
    elif plan.evaluation.base_methods:
        missing.append("base")
    return {"arms": arms, "base": base, "missing": missing}


SETTINGS: dict[str, Callable[[TrainConfig], JSONValue]] = {
    "steps": lambda c: c.steps,
    "batch_problems": lambda c: c.batch_problems,
    "num_generations": lambda c: c.grpo.num_generations,
    "max_new_tokens": lambda c: c.sampling.max_new_tokens,
    "temperature": lambda c: c.sampling.temperature,
    "lr": lambda c: c.optim.lr,
}
"""The training settings the report's header names: key -> how a unit's config holds it."""


def settings(cfg: TrainConfig) -> JSONRecord:
    """``cfg``'s :data:`SETTINGS`."""
    return {key: read(cfg) for key, read in SETTINGS.items()}


def plan_record(plan: StudyPlan) -> JSONRecord:
    """The results file's ``plan``: the settings the tables name (the training base's, and each
    arm's own in ``arm_settings``: a grid over ``optim.lr`` leaves the base's lr to no arm), the
    arms' two-stage methods, the comparisons and decision rule the summary and verdicts read, and
    the whole plan."""
    cfg, e = plan.base_config(), plan.evaluation
    return {
        "model": cfg.model.name,
        "env": cfg.env.id,
        **settings(cfg),
        "arm_settings": {arm: settings(plan.unit_config(arm, plan.seeds[0])) for arm in plan.arms},
        "arms": list(plan.arms),
        "seeds": plan.seeds,
        "test_problems": e.test_problems,
        "val_problems": e.val_problems,
        "eval_seeds": e.seeds,
        "two_stage": {arm: two_stage(plan.unit_config(arm, plan.seeds[0]).algo) for arm in plan.arms},
        "comparisons": [list(p) for p in plan.pairs("comparisons")],
        "exploratory": [list(p) for p in plan.pairs("exploratory")],
        "decision": plan.as_dict()["decision"],
        "study": plan.as_dict(),
    }


def build(
    plan: StudyPlan,
    out: Path,
    command: str = "",
    registration: Registration | None = None,
    added: Sequence[tuple[str, str]] = (),
) -> ResultsDocument:
    """The results document of the study in ``out``; ``added``: comparisons asked for at report
    time (exploratory)."""
    folder = StudyFolder(out)
    calibration = read_calibration(out)
    task = calibration.task
    probs = problems(plan, task)
    cfg = plan.base_config()
    started = folder.read_start()
    doc: ResultsDocument = {
        "bench": "agon study",
        "command": command,
        "task": {"env": cfg.env.id, "kwargs": task_kwargs(plan, task), "calibrated": task},
        "model": cfg.model.name,
        "plan": plan_record(plan),
        "hashes": {"plan_sha256": plan.sha256(), "prompts": None if started is None else started.prompts},
        "registration": None if registration is None else registration.document,
        "calibration": {"split": "validation", **calibration.to_record()},
        "problems": probs,
    }
    if added:
        doc["added_comparisons"] = [list(p) for p in added]
    doc["outcomes"] = collect(plan, out, task, probs["test"]["ids"])
    doc["summary"] = summary_from_outcomes(doc)
    doc["complete"] = not doc["outcomes"]["missing"]
    if folder.failed.is_file():
        doc["failed_units"] = folder.read_failed()
    return doc
