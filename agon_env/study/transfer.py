"""``agon study eval DIR --env ID``: every finished unit of a study evaluated on another task.

Transfer (train on arithmetic, test on GSM8K) is decided after the study's results, so it is
exploratory by construction: its outcomes go to the results file's ``transfer`` section, next to
the study's own and never into its summary or verdicts. Each unit's evaluation is ``agon eval`` of
its run folder with ``--env ID`` (the plan's methods, problem counts and evaluation seeds; the
cascade's direction chosen on the new task's validation problems), run by the study's launcher in
``DIR/transfer/TASK/UNIT`` as a unit named ``UNIT@TASK``: a unit already evaluated is skipped, so
the command resumes.
"""

from __future__ import annotations

import re
from pathlib import Path

from agon_env.errors import InputError
from agon_env.evaluation.report_file import EvalReport, read_eval_report
from agon_env.json_value import JSONRecord
from agon_env.run_folder import EVAL_REPORT
from agon_env.study.analysis import summary_from_outcomes
from agon_env.study.folder import TRANSFER, StudyFolder
from agon_env.study.plan import StudyPlan, two_stage, unit_name
from agon_env.study.results import unit_record
from agon_env.study.results_file import ResultsDocument, Summary, UnitOutcome
from agon_env.study.units import Unit, kwarg_flags, trained

__all__ = ["TRANSFER", "markdown", "sections", "slug", "table", "units"]


def slug(env_id: str, kwargs: JSONRecord, split: str) -> str:
    """A task and split as a folder name: ``agon_gsm8k-v0`` (``,difficulty=3`` ..., ``,split=validation``)."""
    words = [
        env_id,
        *(f"{k}={v}" for k, v in kwargs.items()),
        *([f"split={split}"] if split != "test" else []),
    ]
    return re.sub(r"[^A-Za-z0-9._+=,\-]", "_", ",".join(words))


def units(
    plan: StudyPlan, out: Path, env_id: str, kwargs: JSONRecord, split: str, problems: int | None
) -> list[Unit]:
    """A transfer evaluation of each trained unit of the study in ``out``."""
    e, task = plan.evaluation, slug(env_id, kwargs, split)
    study = StudyFolder(out)
    found = []
    for seed in plan.seeds:
        for arm in plan.arms:
            name = unit_name(arm, seed)
            cfg = plan.unit_config(arm, seed)
            run_dir = study.run(name).path
            if not trained(run_dir, cfg.steps):
                continue
            methods = list(dict.fromkeys([*e.methods, two_stage(cfg.algo)]))
            if two_stage(cfg.algo) == "self-cascade":
                methods = [m for m in methods if m != "cascade"]
            folder = study.transfer_dir(task, name)
            argv = [
                "eval",
                str(run_dir),
                "--env",
                env_id,
                *kwarg_flags(kwargs),
                "--methods",
                *methods,
                "--split",
                split,
                "--problems",
                str(problems or e.test_problems),
                "--val-problems",
                str(e.val_problems),
                "--seeds",
                *map(str, e.seeds),
                "--quiet",
                "--out",
                str(folder),
            ]
            found.append(Unit(f"{name}@{task}", argv, str(folder), threads=cfg.threads))
    return found


def _ids(report: EvalReport) -> list[str]:
    """The problem ids a report evaluated, in their order (its first method's episodes)."""
    methods = report.runs[0].methods
    episodes = next(iter(methods.values()))["episodes"]
    return list(dict.fromkeys(e["problem_id"] for e in episodes))


def sections(plan: StudyPlan, out: Path) -> JSONRecord:
    """The results file's ``transfer`` section: per task evaluated, each unit's outcomes (as the
    study's own units record them), marked exploratory; empty when none was run."""
    tasks: JSONRecord = {}
    for folder in sorted(p for p in (StudyFolder(out).path / TRANSFER).glob("*") if p.is_dir()):
        arms: dict[str, dict[str, UnitOutcome]] = {}
        ids: list[str] | None = None
        data: JSONRecord = {}
        for seed in plan.seeds:
            for arm in plan.arms:
                path = folder / unit_name(arm, seed) / EVAL_REPORT
                if not path.is_file():
                    continue
                report = read_eval_report(path)
                if ids is None:
                    ids, data = _ids(report), dict(report.data)
                elif _ids(report) != ids:
                    raise InputError(f"{path} evaluated other problems than the other units of {folder.name}")
                chosen = report.runs[0].chosen  # on this task's validation
                record = {**unit_record(report, ids, path.parent), "chosen_cascade": chosen}
                arms.setdefault(arm, {})[str(seed)] = record
        if ids is not None:
            tasks[folder.name] = {
                "exploratory": True,
                "env": data.get("env"),
                "kwargs": data.get("task_kwargs"),
                "split": data.get("split"),
                "ids": ids,
                "arms": {a: arms[a] for a in plan.arms if a in arms},
            }
    return tasks


def summary(section: JSONRecord, plan: JSONRecord) -> Summary:
    """A transfer task's rows and paired differences, computed as the study's own summary is (the
    same intervals over seeds × problems at the plan's coverage, the same comparisons), from the
    section's outcome lists and the results file's ``plan`` (:func:`~agon_env.study.results.plan_record`)."""
    return summary_from_outcomes({"plan": plan, "outcomes": {"arms": section["arms"], "base": None}})


def table(name: str, section: JSONRecord, plan: JSONRecord) -> str:
    """A transfer task's pass@1 per arm and method with its interval (seeds × problems), and the
    plan's comparisons on it, headed as exploratory: no verdict is drawn."""
    s = summary(section, plan)
    cov = f"{100 * float(plan.get('decision', {}).get('confidence', 0.95)):g} %"
    methods = list(
        dict.fromkeys(m for seeds in section["arms"].values() for r in seeds.values() for m in r["outcomes"])
    )
    size = f"{len(section['ids'])} {section['split']} problems of {section['env']}"
    rows = [
        f"### Transfer to {name} (exploratory: chosen after the study's results; no verdict)",
        "",
        f"pass@1 on {size}, seeds pooled, with its {cov} interval over seeds × problems:",
        "",
        "| arm | seeds | " + " | ".join(methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for arm, seeds in section["arms"].items():
        cells = []
        for m in methods:
            got = [x for r in seeds.values() for x in r["outcomes"].get(m, [])]
            row = s["arms"].get(arm, {}).get(m)
            if not got or row is None:
                cells.append("–")
                continue
            low, high = row["interval"]
            rate = f"{sum(got)}/{len(got)} = {100 * sum(got) / len(got):.0f} %"
            cells.append(f"{rate} [{100 * low:.0f}, {100 * high:.0f}]")
        rows.append(f"| {arm} | {len(seeds)} | " + " | ".join(cells) + " |")
    if s["paired"]:
        rows += [
            "",
            f"The plan's comparisons on this task (seeds every arm finished; {cov} interval over seeds × "
            "problems; discordant: seed × problem cells on which the first side scores more / less):",
            "",
            "| paired difference | pass@1 (pp) | interval (pp) | per seed (pp) | discordant |",
            "|---|---|---|---|---|",
        ]
        for pair, d in s["paired"].items():
            per = " · ".join(f"s{k} {100 * v:+.1f}" for k, v in d["per_seed"].items())
            interval = f"[{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"
            split = f"{d['discordant']['first_only']} / {d['discordant']['second_only']}"
            rows.append(f"| {pair} | {100 * d['mean']:+.1f} | {interval} | {per} | {split} |")
    return "\n".join(rows)


def markdown(doc: ResultsDocument) -> str:
    """Every transfer section of a results document as Markdown ("" when there is none)."""
    return "".join(f"\n\n{table(name, sec, doc['plan'])}\n" for name, sec in doc.get(TRANSFER, {}).items())
