"""``agon study verify`` binds a results file to what was frozen outside it (issue 57, items 1–3):
each tampering the issue lists fails with one line naming what disagrees.

The fast tests give ``data/smoke_results.json`` (a real smoke study's results) a registration
with a fingerprint, as ``register`` writes it, and check it against the fingerprint; the slow ones
run the smoke study once (``agon study register`` + ``run``) and tamper with copies of its folder.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agon_env.study import tables
from agon_env.study.analysis import summary_from_outcomes
from agon_env.study.binding import bind, seal
from agon_env.study.commands.study import main
from agon_env.study.diff import units
from agon_env.study.plan import from_dict
from agon_env.study.registration import record

ROOT = Path(__file__).resolve().parents[2]
SMOKE = Path(__file__).resolve().parent / "data" / "smoke_results.json"
PLAN = ROOT / "studies" / "smoke.yaml"


def anchored() -> dict:
    """The smoke results as registered today: a registration with its anchor and fingerprint, made
    before the units started, and every unit's start time."""
    doc = json.loads(SMOKE.read_text())
    doc["registration"] = record(from_dict(doc["registration"]["plan"])) | {
        "registered_at": "2026-12-05T02:06:57Z"
    }
    for rec in units(doc).values():
        rec["started_at"] = "2026-12-05T02:07:00Z"
    return doc


def write(doc: dict, folder: Path, name: str = "results.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def refused(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    """The one line ``agon study verify`` fails with."""
    assert main(["verify", str(path), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def tamper_rule(doc: dict, **decision: object) -> dict:
    """``doc`` with its rule edited everywhere in it and every hash in it recomputed (the anchor and
    fingerprint of its registration copy too): self-consistent, but another registration."""
    doc = copy.deepcopy(doc)
    reg = doc["registration"]
    plan = from_dict({**reg["plan"], "decision": {**reg["plan"]["decision"], **decision}})
    doc["registration"] = record(plan) | {"registered_at": reg["registered_at"]}
    doc["hashes"]["plan_sha256"] = plan.sha256()
    doc["plan"] |= {"decision": plan.as_dict()["decision"], "study": plan.as_dict()}
    doc["summary"] = summary_from_outcomes(doc)
    return doc


def test_a_results_file_alone_is_self_consistent_never_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = anchored()
    path = write(doc, tmp_path)
    assert main(["verify", str(path)]) == 0
    said = capsys.readouterr().out
    assert "self-consistent, not bound" in said and "bound to" not in said.replace("not bound", "")
    assert main(["verify", str(path), "--fingerprint", doc["registration"]["fingerprint"]]) == 0
    assert "bound to the fingerprint given" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("decision", "name"), [({"confidence": 0.9}, "confidence"), ({"equivalence_margin": 0.5}, "margin")]
)
def test_a_rule_edited_with_every_hash_recomputed_and_rerendered_misses_the_fingerprint(
    decision: dict, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    published = anchored()["registration"]["fingerprint"]
    path = write(tamper_rule(anchored(), **decision), tmp_path)
    assert main(["report", str(path), "--results", str(path)]) == 0  # the library re-renders it
    capsys.readouterr()
    assert main(["verify", str(path)]) == 0  # alone it is consistent ...
    assert "self-consistent, not bound" in capsys.readouterr().out
    err = refused(path, capsys, "--fingerprint", published)  # ... and not what was published
    assert f"fingerprint: given {published}, the results' registration hashes to" in err


def test_a_wrong_fingerprint_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(anchored(), tmp_path)
    assert "fingerprint: given 0000" in refused(path, capsys, "--fingerprint", "0" * 64)


def test_two_test_ids_swapped_fail_on_their_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = anchored()
    ids = doc["problems"]["test"]["ids"]
    ids[0], ids[1] = ids[1], ids[0]
    err = refused(write(doc, tmp_path), capsys)
    assert f"problems.test.ids[0]: results {ids[0]}, re-derived {ids[1]}" in err


def test_the_registration_moved_after_the_units_with_their_times_deleted_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = anchored()
    published = doc["registration"]["fingerprint"]
    doc["registration"]["registered_at"] = "2030-01-01T00:00:00Z"
    for rec in units(doc).values():
        del rec["written_at"]
    err = refused(write(doc, tmp_path), capsys, "--fingerprint", published)
    assert re.search(r"outcomes\.\w+-seed\d\.written_at: missing", err)
    for rec in units(doc).values():  # times kept, the registration still after the first start
        rec["written_at"] = "2030-01-02T00:00:00Z"
    err = refused(write(doc, tmp_path), capsys, "--fingerprint", published)
    assert "registration.registered_at: 2030-01-01T00:00:00Z is after the first unit's start" in err


def test_a_study_registered_before_fingerprints_verifies_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(SMOKE.read_text())  # registered under 86f3fbc's rules: no anchor, no start times
    path = write(doc, tmp_path)
    (tmp_path / "registration.json").write_text(json.dumps(doc["registration"]))
    assert main(["verify", str(path)]) == 0
    assert "registered without a fingerprint (the older rules, the same as " in capsys.readouterr().out
    doc["registration"]["plan"]["decision"]["confidence"] = 0.9
    (tmp_path / "registration.json").write_text(json.dumps(doc["registration"]))
    assert "plan.decision.confidence: results 0.95, registration 0.9" in refused(path, capsys)
    assert "registration has none (the older rules)" in refused(path, capsys, "--fingerprint", "0" * 64)


def test_a_folder_with_a_started_unit_cannot_be_registered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "units").mkdir()
    (tmp_path / "units" / "grpo-seed0.started").write_text("2026-12-05T02:07:00Z\n")
    assert main(["register", str(PLAN), "--out", str(tmp_path)]) == 2
    assert "already holds started units: a registration must come before them" in capsys.readouterr().err
    assert not (tmp_path / "registration.json").exists()


def test_a_verdict_edited_in_report_md_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(anchored(), tmp_path)
    doc = bind(path)[0]
    tables.write(doc, tmp_path, "results.json")
    report = tmp_path / "report.md"
    seal(report, path)
    assert main(["verify", str(path), "--report", str(report)]) == 0
    capsys.readouterr()
    text = report.read_text()
    verdict = "| agon − grpo, standalone | +0.0 | [+0.0, +0.0] | s0 +0.0 · s1 +0.0 | [+0.0, +0.0] (1 df) |"
    assert f"{verdict} difference not shown |" in text
    report.write_text(text.replace(f"{verdict} difference not shown |", f"{verdict} agon better |"))
    assert "report.md line " in refused(path, capsys, "--report", str(report))
    report.write_text(text.replace("Results file sha256: ", "Results file sha256: 0"))
    assert "report.md: results sha256 0" in refused(path, capsys, "--report", str(report))


def test_a_recorded_study_verifies_as_what_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "docs" / "results" / "exchange_cpu.json"
    assert main(["verify", str(path)]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            "recorded without a registration (the older rules): self-consistent, not bound; "
            "its 120 test problems re-derive"
        )
    )
    assert "registration: none in the results file" in refused(path, capsys, "--fingerprint", "0" * 64)


# ---- a real study folder: its registration.json and each unit's own records ----------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke study registered and run once (the tiny random model: ~1 min on 2 cores)."""
    out = tmp_path_factory.mktemp("anchor") / "smoke"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    for argv in (["register", str(PLAN), "--out", str(out)], ["run", str(PLAN), "--out", str(out)]):
        done = subprocess.run(
            [sys.executable, "-m", "agon_env.cli", "study", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture
def copied(study: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(study, tmp_path / "smoke"))


def results_of(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


@pytest.mark.slow
def test_a_real_study_is_bound_to_its_registration_its_units_and_its_report(
    copied: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    published = json.loads((copied / "registration.json").read_text())["fingerprint"]
    flags = ["--fingerprint", published, "--report", str(copied / "report.md")]
    assert main(["verify", str(copied / "results.json"), *flags]) == 0
    said = capsys.readouterr().out
    assert "bound to the fingerprint given" in said and "its units' own records" in said
    for unit in ("base", "grpo-seed0", "agon-seed1"):
        stamp = json.loads((copied / "eval" / unit / "unit.json").read_text())
        assert stamp["started_at"] <= stamp["written_at"] and len(stamp["eval_sha256"]) == 64
        assert (copied / "units" / f"{unit}.started").is_file()
        assert bool(stamp["adapters"]) == (unit != "base")


@pytest.mark.slow
def test_a_rule_edited_rehashed_and_rerendered_fails_on_the_folders_registration(
    copied: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tamper_rule(results_of(copied), confidence=0.9), copied)
    assert main(["report", str(path)]) == 2  # beside its registration: refused, not re-rendered
    capsys.readouterr()
    assert "plan.decision.confidence: results 0.9, registration 0.95" in refused(path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("edit", ["one flipped", "all ones"])
def test_outcomes_edited_with_the_summary_recomputed_fail_on_the_units_eval_json(
    edit: str, copied: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = results_of(copied)
    lists = doc["outcomes"]["arms"]["grpo"]["0"]["outcomes"]["standalone:agent_a"]
    lists[:] = [1 - lists[0], *lists[1:]] if edit == "one flipped" else [1] * len(lists)
    doc["summary"] = summary_from_outcomes(doc)
    err = refused(write(doc, copied), capsys)
    assert "outcomes.grpo-seed0.outcomes.standalone:agent_a[0]: results 1, eval.json 0" in err


@pytest.mark.slow
def test_a_registration_moved_after_the_units_with_their_times_deleted_fails(
    copied: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reg = json.loads((copied / "registration.json").read_text())
    reg["registered_at"] = "2030-01-01T00:00:00Z"
    (copied / "registration.json").write_text(json.dumps(reg))
    doc = results_of(copied)
    doc["registration"] = reg
    for rec in units(doc).values():
        del rec["written_at"]
    assert re.search(r"outcomes\.\w+-seed\d\.written_at: missing", refused(write(doc, copied), capsys))


@pytest.mark.slow
def test_unit_records_deleted_and_eval_json_touched_fail(
    copied: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for stamp in copied.glob("eval/*/unit.json"):
        stamp.unlink()
    for report in copied.glob("eval/*/eval.json"):
        report.touch()
    assert main(["report", str(copied)]) == 0  # rebuilt from the units: their times now unknown
    capsys.readouterr()
    err = refused(copied / "results.json", capsys)
    assert "started_at: missing" in err or "unit.json: missing" in err
