"""The study folder's one owner: its paths, and its documents read and written byte for byte as
earlier versions wrote them (so recorded folders and the hashes of their files still verify)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agon_env.study import folder as F
from agon_env.study.folder import (
    CalibrationRecord,
    Measured,
    Registration,
    StudyFolder,
    StudyStart,
    UnitRecord,
)

ROOT = Path(__file__).resolve().parents[2]


def test_every_path_is_where_the_layout_says(tmp_path: Path) -> None:
    f = StudyFolder(tmp_path)
    paths = {
        "plan.yaml": f.plan,
        "study.json": f.start,
        "registration.json": f.registration,
        "calibration.json": f.calibration,
        "results.json": f.results,
        "report.md": f.report,
        "accuracy_vs_length.png": f.figure,
        "failed.json": f.failed,
        "units/agon-seed0.json": f.spec("agon-seed0"),
        "units/agon-seed0.yaml": f.unit_config("agon-seed0"),
        "units/agon-seed0.started": f.started("agon-seed0"),
        "locks/agon-seed0": f.lock("agon-seed0"),
        "logs/agon-seed0.log": f.log("agon-seed0"),
        "runs/agon-seed0/metrics.jsonl": f.run("agon-seed0").metrics,
        "eval/base/eval.json": f.eval_report("base"),
        "eval/base/unit.json": f.unit_record("base"),
        "calibration/difficulty=3": f.calibration_dir("difficulty=3"),
        "transfer/agon_gsm8k-v0/agon-seed0": f.transfer_dir("agon_gsm8k-v0", "agon-seed0"),
    }
    assert {k: str(p.relative_to(tmp_path)) for k, p in paths.items()} == {k: k for k in paths}


@pytest.mark.parametrize(
    ("cls", "text"),
    [
        (StudyStart, json.dumps({"prompts": "0123abcd", "started_at": "2026-12-05T02:07:00Z"}) + "\n"),
        (
            UnitRecord,
            json.dumps(
                {
                    "started_at": "2026-12-05T02:07:00Z",
                    "written_at": "2026-12-05T02:09:00Z",
                    "pid": 41,
                    "eval_sha256": "ab" * 32,
                    "adapters": {"agent_a/adapter_model.safetensors": "cd" * 32},
                }
            )
            + "\n",
        ),
    ],
)
def test_a_document_reads_and_writes_back_byte_for_byte(
    cls: type[StudyStart | UnitRecord], text: str
) -> None:
    assert cls.from_json(text).to_json() == text


def test_calibration_reads_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    chosen = {"keyword": "difficulty", "chosen": 3, "task": {"difficulty": 3}, "measured": {}}
    chosen["measured"] = {"difficulty=3": {"successes": 3, "trials": 10, "rate": 0.3}}
    for doc in (chosen, {"task": {}, "measured": {}}):
        text = json.dumps(doc) + "\n"
        record = CalibrationRecord.from_record(json.loads(text))
        assert record.to_json() == text
        StudyFolder(tmp_path).write_calibration(record)
        assert (tmp_path / "calibration.json").read_text() == text
    assert CalibrationRecord.from_record(chosen).measured["difficulty=3"] == Measured(3, 10, 0.3)


def test_a_recorded_registration_writes_back_as_it_was_frozen(tmp_path: Path) -> None:
    reg = json.loads((ROOT / "tests/study/data/smoke_results.json").read_text())["registration"]
    text = json.dumps(reg, indent=1, ensure_ascii=False) + "\n"
    read = Registration.from_record(json.loads(text))
    assert read.to_json() == text and read.plan_sha256 == reg["plan_sha256"]
    folder = StudyFolder(tmp_path)
    folder.write_registration(read)
    assert folder.read_registration() == read and folder.registration.read_text() == text


def test_failed_units_are_written_and_cleared(tmp_path: Path) -> None:
    folder = StudyFolder(tmp_path)
    assert folder.read_failed() == {}
    folder.write_failed({"agon-seed0": "RuntimeError: boom"})
    assert folder.failed.read_text() == json.dumps({"agon-seed0": "RuntimeError: boom"}, indent=1) + "\n"
    assert folder.read_failed() == {"agon-seed0": "RuntimeError: boom"}
    folder.write_failed({})
    assert not folder.failed.exists()


def test_no_other_study_module_spells_a_study_folder_name() -> None:
    """Every name in a study folder is spelled in folder.py alone (34 joins across 8 modules before)."""
    names = [F.PLAN, F.START, F.REGISTRATION, F.CALIBRATION, F.FAILED, F.UNIT_RECORD, F.REPORT, F.FIGURE]
    spelled = re.compile("|".join(rf'"{re.escape(n)}"' for n in names) + r'|/ "(units|locks|logs|runs|eval)"')
    found = [
        f"{p.name}:{n}"
        for p in sorted((ROOT / "agon_env/study").glob("*.py"))
        if p.name != "folder.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if spelled.search(line)
    ]
    assert found == []
