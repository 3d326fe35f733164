"""A study's verdict is bound to its registration and says only what its data can carry (issue #46).

``data/smoke_results.json`` is a real results file: ``agon study register studies/smoke.yaml --out
/tmp/j46smk`` then ``agon study run studies/smoke.yaml --out /tmp/j46smk --workers 1`` (the tiny
random model: every outcome 0).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from agon_env.study import tables
from agon_env.study.analysis import summary_from_outcomes
from agon_env.study.commands.study import main
from agon_env.study.plan import from_dict
from agon_env.study.verify import VerifyError, verify

SMOKE = Path(__file__).resolve().parent / "data" / "smoke_results.json"
NAME = "agon − grpo, standalone"


def smoke() -> dict:
    return json.loads(SMOKE.read_text())


def reregister(doc: dict, **decision: object) -> dict:
    """``doc`` as if its plan had been registered with ``decision`` (hashes and summary consistent)."""
    doc = copy.deepcopy(doc)
    plan = from_dict(
        {**doc["registration"]["plan"], "decision": {**doc["registration"]["plan"]["decision"], **decision}}
    )
    doc["registration"] |= {"plan": plan.as_dict(), "plan_sha256": plan.sha256()}
    doc["hashes"]["plan_sha256"] = plan.sha256()
    doc["plan"] |= {"decision": plan.as_dict()["decision"], "study": plan.as_dict()}
    doc["summary"] = summary_from_outcomes(doc)
    return doc


def write(doc: dict, tmp_path: Path) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_all_zero_study_with_a_margin_gets_no_equivalence(tmp_path: Path) -> None:
    doc = reregister(smoke(), equivalence_margin=0.05)
    diff = doc["summary"]["paired"][NAME]
    assert diff["low"] == diff["high"] == 0.0  # every resample of all-zero lists is [0, 0] ...
    said = tables.verdict_cell(doc, NAME, diff)
    assert "equivalent" not in said and said.startswith("cannot tell: both arms at 0 %")  # ... no evidence
    doc["complete"] = False
    assert "equivalent" not in tables.verdict_cell(doc, NAME, diff)
    verify(write(doc | {"complete": True}, tmp_path))  # the new summary keys verify


@pytest.mark.parametrize("edit", ["confidence", "train_steps", "plan_body"])
def test_a_results_file_edited_apart_from_its_registration_fails_and_decides_nothing(
    edit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = smoke()
    if edit == "confidence":  # the rule the summary used, recomputed to match
        doc["plan"]["decision"]["confidence"] = 0.5
        doc["plan"]["study"]["decision"]["confidence"] = 0.5
        doc["summary"] = summary_from_outcomes(doc, 0.5)
    elif edit == "train_steps":
        doc["plan"]["study"]["train"]["steps"] = 400
    else:  # the registered plan edited, its recorded hash kept
        doc["registration"]["plan"]["decision"]["confidence"] = 0.5
        doc["plan"]["decision"]["confidence"] = 0.5
        doc["plan"]["study"]["decision"]["confidence"] = 0.5
        doc["summary"] = summary_from_outcomes(doc)
    path = write(doc, tmp_path)
    with pytest.raises(VerifyError, match=r"registration|registered"):
        verify(path)
    assert main(["verify", str(path)]) == 2
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"| {NAME} |" in out and "exploratory (the results file differs from its registration)" in out


def test_a_registration_after_the_results_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = verify(SMOKE)  # as recorded: registered before its results, its verdicts not exploratory
    assert not tables.verdict_cell(doc, NAME, doc["summary"]["paired"][NAME]).startswith("exploratory")
    doc["registration"]["registered_at"] = "2099-01-01T00:00:00Z"
    path = write(doc, tmp_path)
    late = "registered_at: 2099-01-01T00:00:00Z is after the results of 5 unit"
    with pytest.raises(VerifyError, match=late):
        verify(path)
    assert main(["report", str(path)]) == 0
    assert "exploratory (registered after the results)" in capsys.readouterr().out


def test_a_report_renders_from_the_results_file_without_the_task_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cd / && agon study report DIR`` with the user's task module absent: the file holds every outcome."""
    study = tmp_path / "study"
    study.mkdir()
    plan = smoke()["plan"]["study"]
    plan["train"]["env.id"] = "j46_absent_task_module:me/task-v0"  # importable only where the study ran
    (study / "plan.yaml").write_text(yaml.safe_dump(plan))
    (study / "results.json").write_text(SMOKE.read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(study)]) == 0
    captured = capsys.readouterr()
    assert "cannot import 'j46_absent_task_module'" in captured.err
    assert f"| {NAME} |" in (study / "report.md").read_text()


def test_register_states_the_detectable_difference_and_refuses_a_margin_below_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = smoke()["registration"]["plan"]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    assert main(["register", str(path), "--out", str(tmp_path / "a"), "--base-rate", "0.3"]) == 0
    said = capsys.readouterr().out
    # the registered rule's own power, simulated: 2 seeds × 6 test problems resolve little (McNemar's
    # formula said ±52.4 pp, which the bootstrap over seeds with every seed's sign detects far less often)
    assert "agon - grpo: detectable difference ±64.7 pp at 80 % power and 95 % confidence" in said
    assert "(simulated: registered rule, 400 draws" in said
    reg = json.loads((tmp_path / "a" / "registration.json").read_text())
    assert (
        reg["detectable"]["difference"] == pytest.approx(0.647, abs=1e-3) and reg["detectable"]["pairs"] == 12
    )
    path.write_text(yaml.safe_dump({**plan, "decision": {"equivalence_margin": 0.05}}))
    assert main(["register", str(path), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "decision.equivalence_margin: ±5 pp is below the smallest difference this plan can detect" in err
    assert not (tmp_path / "b").exists()
    assert main(["register", str(path), "--print-plan"]) == 0
    # base rate 50 %: even a rise to 100 % is detected in fewer than 80 % of studies of this size
    assert "# no difference detectable (not even the largest possible rise)" in capsys.readouterr().out


def test_the_report_says_the_registration_the_rule_and_the_verifier_failures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = smoke()
    doc["outcomes"]["arms"]["agon"]["1"]["score_timeouts"].pop("standalone:agent_b")  # not recorded
    shown = tables.markdown(doc, "study", "r.json")
    assert "Registered 2026-12-05T02:06:57Z (plan sha256 d150aba5b4e5" in shown
    assert (
        "Decision rule: a difference is shown when its 95 % bootstrap interval excludes 0 and every seed"
        in shown
    )
    assert "no equivalence is claimed (no margin)" in shown and "Detectable difference: unknown" in shown
    assert "| agon-seed1 | standalone:agent_b | 0 | unknown |" in shown
    assert "| agon-seed0 | cascade:agent_a>agent_b | 0 | 0 |" in shown
    doc["registration"] = None
    assert "Not registered: every comparison is exploratory." in tables.markdown(doc, "study", "r.json")
