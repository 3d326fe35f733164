"""A study's calibration: which value of one task keyword the study trains and tests at.

The plan's ``calibration`` (:class:`agon_env.study.plan.Calibration`) names a task keyword
(``difficulty``), candidate values in order, a band of base pass@1 and a number of problems.
The procedure, run once before any unit trains:

1. For each candidate in order, the untrained base answers ``problems`` *validation* problems
   few-shot at that value (one ``agon eval`` unit, ``calibration/KEY=VALUE/``; never the test split).
2. With several candidates, the first whose pass@1 lies inside the band is taken and the search
   stops; when none does, the measured candidate nearest the band's middle. A single candidate is
   measured and taken.
3. The choice and every measurement are written to ``calibration.json`` and read back from then
   on (a resumed study never measures again); the results file and report show them.

A plan without ``calibration`` records an empty choice: the units use the plan's own keywords.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agon_env.evaluation.report import write_text_atomic
from agon_env.evaluation.report_file import read_eval_report
from agon_env.study.plan import StudyPlan
from agon_env.study.units import calibration_unit, level, write_specs

CALIBRATION = "calibration.json"
"""The calibration's record in a study folder: ``task`` (the chosen keyword), ``measured``."""


def uncalibrated() -> dict[str, Any]:
    """The record of a plan without calibration (or of a study folder not yet calibrated): a fresh
    one each time, since callers read its ``task`` into the units' keywords."""
    return {"task": {}, "measured": {}}


def read_calibration(out: Path) -> dict[str, Any]:
    """The study folder's calibration record (:func:`uncalibrated` when it has none yet)."""
    path = out / CALIBRATION
    return json.loads(path.read_text()) if path.is_file() else uncalibrated()


def calibrate(
    plan: StudyPlan,
    out: Path,
    launch: Callable[[dict[str, Path]], dict[str, str]],
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The calibrated task keyword, measured by ``launch``-ing the base's units the first time
    (the procedure above; ``say`` tells the console each measurement), read back from
    ``calibration.json`` every time after."""
    if (out / CALIBRATION).is_file():
        return read_calibration(out)
    cal = plan.calibration
    if cal is None:
        record = uncalibrated()
    else:
        measured: dict[str, Any] = {}
        chosen = None
        for value in cal.candidates:
            unit = calibration_unit(plan, out, value)
            failed = launch(write_specs(out, [unit]))
            if failed:
                raise RuntimeError(f"calibration failed: {failed[unit.name]}")
            r = read_eval_report(unit.eval_dir).runs[0].methods["base-few-shot"]["pass@1"]
            key = f"{cal.keyword}={level(value)}"
            measured[key] = {"successes": r["successes"], "trials": r["trials"], "rate": r["rate"]}
            say(f"base few-shot at {key}: {100 * r['rate']:.1f}%")
            if len(cal.candidates) > 1 and cal.band[0] <= r["rate"] <= cal.band[1]:
                chosen = value
                break
        if chosen is None:
            middle = sum(cal.band) / 2
            chosen = min(
                cal.candidates, key=lambda v: abs(measured[f"{cal.keyword}={level(v)}"]["rate"] - middle)
            )
        record = {
            "keyword": cal.keyword,
            "chosen": level(chosen),
            "task": {cal.keyword: level(chosen)},
            "measured": measured,
        }
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / CALIBRATION, json.dumps(record) + "\n")
    return record
