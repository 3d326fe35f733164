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

from collections.abc import Callable
from pathlib import Path

from agon_env.evaluation.report_file import read_eval_report
from agon_env.study.folder import CALIBRATION, CalibrationRecord, Measured, StudyFolder
from agon_env.study.plan import StudyPlan
from agon_env.study.units import calibration_unit, level, write_specs

__all__ = ["CALIBRATION", "calibrate", "read_calibration", "uncalibrated"]


def uncalibrated() -> CalibrationRecord:
    """The record of a plan without calibration (or of a study folder not yet calibrated)."""
    return CalibrationRecord()


def read_calibration(out: Path) -> CalibrationRecord:
    """The study folder's calibration record (:func:`uncalibrated` when it has none yet)."""
    return StudyFolder(out).read_calibration() or uncalibrated()


def calibrate(
    plan: StudyPlan,
    out: Path,
    launch: Callable[[dict[str, Path]], dict[str, str]],
    say: Callable[[str], None] = print,
) -> CalibrationRecord:
    """The calibrated task keyword, measured by ``launch``-ing the base's units the first time
    (the procedure above; ``say`` tells the console each measurement), read back from
    ``calibration.json`` every time after."""
    folder = StudyFolder(out)
    if (found := folder.read_calibration()) is not None:
        return found
    cal = plan.calibration
    if cal is None:
        record = uncalibrated()
    else:
        measured: dict[str, Measured] = {}
        chosen = None
        for value in cal.candidates:
            unit = calibration_unit(plan, out, value)
            failed = launch(write_specs(out, [unit]))
            if failed:
                raise RuntimeError(f"calibration failed: {failed[unit.name]}")
            r = read_eval_report(unit.eval_dir).runs[0].methods["base-few-shot"]["pass@1"]
            key = f"{cal.keyword}={level(value)}"
            measured[key] = Measured(r["successes"], r["trials"], r["rate"])
            say(f"base few-shot at {key}: {100 * r['rate']:.1f}%")
            if len(cal.candidates) > 1 and cal.band[0] <= r["rate"] <= cal.band[1]:
                chosen = value
                break
        if chosen is None:
            middle = sum(cal.band) / 2
            chosen = min(
                cal.candidates, key=lambda v: abs(measured[f"{cal.keyword}={level(v)}"].rate - middle)
            )
        record = CalibrationRecord({cal.keyword: level(chosen)}, measured, cal.keyword, level(chosen))
    out.mkdir(parents=True, exist_ok=True)
    folder.write_calibration(record)
    return record
