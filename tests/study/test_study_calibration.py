"""A study's calibration procedure (agon_env/study/calibration.py), with a launcher that writes each
calibration unit's eval.json instead of running the base."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agon_env.study.calibration import CALIBRATION, calibrate, read_calibration, uncalibrated
from agon_env.study.folder import Measured
from agon_env.study.plan import StudyPlan, from_dict

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "studies" / "smoke.yaml"


def _plan(candidates: list[float], band: tuple[float, float] = (0.2, 0.4)) -> StudyPlan:
    cal = {"keyword": "difficulty", "candidates": candidates, "band": list(band), "problems": 5}
    return from_dict(yaml.safe_load(SMOKE.read_text()) | {"calibration": cal})


def _launcher(rates: dict[str, float], launched: list[str]):
    """Each unit's eval.json as agon eval would write it, the base scoring ``rates[name]``."""

    def launch(specs: dict[str, Path]) -> dict[str, str]:
        for name, spec in specs.items():
            launched.append(name)
            folder = Path(json.loads(spec.read_text())["eval_dir"])
            folder.mkdir(parents=True, exist_ok=True)
            rate = rates[name]
            pass1 = {"successes": round(10 * rate), "trials": 10, "rate": rate}
            doc = {"runs": [{"label": "base", "methods": {"base-few-shot": {"pass@1": pass1}}}]}
            (folder / "eval.json").write_text(json.dumps(doc))
        return {}

    return launch


def _quiet(_: str) -> None:
    pass


def test_the_first_candidate_in_the_band_is_chosen_and_the_rest_not_measured(tmp_path: Path) -> None:
    rates = {"calibrate-difficulty=1": 0.9, "calibrate-difficulty=2": 0.3, "calibrate-difficulty=3": 0.25}
    launched: list[str] = []
    record = calibrate(_plan([1, 2.0, 3]), tmp_path, _launcher(rates, launched), say=_quiet)
    assert launched == ["calibrate-difficulty=1", "calibrate-difficulty=2"]
    assert record.chosen == 2 and record.task == {"difficulty": 2}
    assert record.measured["difficulty=2"] == Measured(3, 10, 0.3)
    assert json.loads((tmp_path / CALIBRATION).read_text()) == record.to_record()
    # measured once: a resumed study reads the record back and launches nothing
    again: list[str] = []
    assert calibrate(_plan([1, 2, 3]), tmp_path, _launcher(rates, again), say=_quiet) == record
    assert again == [] and read_calibration(tmp_path) == record


def test_without_a_candidate_in_the_band_the_nearest_to_its_middle_is_chosen(tmp_path: Path) -> None:
    rates = {"calibrate-difficulty=1": 0.9, "calibrate-difficulty=2": 0.5, "calibrate-difficulty=3": 0.05}
    launched: list[str] = []
    record = calibrate(_plan([1, 2, 3]), tmp_path / "a", _launcher(rates, launched), say=_quiet)
    assert len(launched) == 3 and record.chosen == 2  # |0.5 - 0.3| < |0.05 - 0.3| < |0.9 - 0.3|
    # one candidate is used whatever it measured
    one = calibrate(_plan([3]), tmp_path / "b", _launcher({"calibrate-difficulty=3": 0.9}, []), say=_quiet)
    assert one.chosen == 3 and one.measured["difficulty=3"].rate == 0.9


def test_a_plan_without_calibration_records_an_empty_task(tmp_path: Path) -> None:
    plan = from_dict(yaml.safe_load(SMOKE.read_text()))
    assert read_calibration(tmp_path) == uncalibrated()
    assert uncalibrated().to_record() == {"task": {}, "measured": {}}

    def launch(specs: dict[str, Path]) -> dict[str, str]:
        raise AssertionError("nothing to measure")

    assert calibrate(plan, tmp_path, launch) == uncalibrated()
    assert read_calibration(tmp_path) == uncalibrated()
    # a fresh record each call: one caller filling its task in does not reach the next
    read_calibration(tmp_path / "none").task["difficulty"] = 9
    assert read_calibration(tmp_path / "none") == uncalibrated()
