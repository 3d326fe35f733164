"""A study's units on one tracker page: ``agon study run --report-to wandb`` (or ``trackio``).

Each unit's run reports as ``agon train --report-to`` does (:mod:`agon_env.algorithms.trackers`,
named after its run folder, ``agon-seed0``); the study adds the grouping through the environment
the trackers already read, so no tracker changes: wandb's ``WANDB_RUN_GROUP`` is the study's name
and ``WANDB_JOB_TYPE`` the unit's arm; trackio's ``TRACKIO_PROJECT`` is the study's name (its runs
are the units). When the study ends, :func:`log_summary` logs one more run, ``NAME-summary``
(job type ``summary``): every arm and method's pass@1 over its seeds and problems, and the
report's text. A variable the user set is kept.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from agon_env.json_value import JSONRecord
from agon_env.study.results_file import ResultsDocument

TRACKED = ("wandb", "trackio")
"""The trackers a study groups (tensorboard writes under each run folder: nothing to group)."""


def unit_env(study_name: str, unit_name: str, report_to: Sequence[str]) -> dict[str, str]:
    """The environment variables that put unit ``unit_name`` in study ``study_name``'s group."""
    arm = unit_name.rsplit("-seed", 1)[0]
    env: dict[str, str] = {}
    if "wandb" in report_to:
        env |= {"WANDB_RUN_GROUP": study_name, "WANDB_JOB_TYPE": arm}
    if "trackio" in report_to:
        env["TRACKIO_PROJECT"] = study_name
    return {k: v for k, v in env.items() if k not in os.environ}


def spec_env(spec: Path, config: JSONRecord | None) -> dict[str, str]:
    """:func:`unit_env` of the unit whose spec is ``spec`` (in ``STUDY/units/``; ``config``: its
    resolved ``TrainConfig``, None for the base, which trains nothing)."""
    from agon_env.config import read_yaml

    report_to = (config or {}).get("report_to") or []
    if not any(t in TRACKED for t in report_to):
        return {}
    from agon_env.study.folder import StudyFolder

    study = StudyFolder(spec.parent.parent)
    plan = read_yaml(study.plan, "study plan")
    return unit_env(str(plan.get("name") or study.path.name), spec.stem, report_to)


def scalars(doc: ResultsDocument) -> dict[str, float]:
    """A results document's pass@1 per arm and method (seeds and problems pooled), and the base's."""
    o = doc["outcomes"]
    units = [(arm, r) for arm, seeds in o["arms"].items() for r in seeds.values()]
    units += [("base", o["base"])] if o.get("base") else []
    pooled: dict[str, list[int]] = {}
    for arm, record in units:
        for method, got in record["outcomes"].items():
            pooled.setdefault(f"pass@1/{arm}/{method}", []).extend(got)
    return {k: sum(v) / len(v) for k, v in pooled.items() if v}


def log_summary(doc: ResultsDocument, study: Path, report_to: Sequence[str]) -> list[object]:
    """Log the study's summary run to each tracker of ``report_to`` it groups; returns the runs
    opened (wandb's run objects, for a caller that reads them back)."""
    name = doc["plan"].get("study", {}).get("name") or study.name
    from agon_env.study.folder import StudyFolder

    values, report = scalars(doc), StudyFolder(study).report
    text = report.read_text() if report.is_file() else ""
    runs = []
    if "wandb" in report_to:
        import wandb

        run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "agon-env"),
            group=name,
            job_type="summary",
            name=f"{name}-summary",
            dir=str(study),
            reinit=True,
            config={"study": doc["plan"].get("study", {})},
        )
        run.log(values)
        run.summary["report"] = text
        run.summary["complete"] = doc.get("complete")
        runs.append(run)
        run.finish()
    if "trackio" in report_to:
        import trackio

        trackio.init(
            project=os.environ.get("TRACKIO_PROJECT", name),
            name=f"{name}-summary",
            auto_log_cpu=False,
            auto_log_gpu=False,
        )
        trackio.log(values)
        trackio.finish()
    return runs
