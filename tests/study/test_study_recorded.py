"""Nothing lost: the studies recorded before ``agon study`` verify, their test problems are held
out, and their docs blocks regenerate from their results files alone."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from agon_env.study import tables
from agon_env.study.commands.study import main
from agon_env.study.results import sha
from agon_env.study.verify import VerifyError, verify

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
RECORDED = {  # block in docs/benchmarks.md -> results file
    "replication": "replication_cpu.json",
    "replication-v2": "replication_cpu_v2.json",
    "study-2": "study_2.json",
    "exchange-3": "exchange_cpu.json",
}
COMPLETE = [  # (results file, its least test and validation problems, the arms with >= 3 seeds)
    pytest.param("replication_cpu.json", 200, 50, ("grpo", "coop", "agon"), id="replication"),
    pytest.param("study_2.json", 300, 150, ("grpo", "coop", "agon", "agon-redacted"), id="study-2"),
    pytest.param("exchange_cpu.json", 120, 40, ("agon", "agon-latent", "agon-none"), id="exchange-3"),
]


@functools.cache
def verified(name: str) -> dict:
    """The recorded file, verified once per session (each summary is 4000 bootstrap resamples)."""
    return verify(RESULTS / name)


@pytest.mark.parametrize("name", sorted(RECORDED.values()))
def test_a_recorded_study_verifies(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(RESULTS / name)]) == 0
    assert "the summary recomputes from the outcome lists" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["study_2.json", "exchange_cpu.json"])
def test_a_copy_with_one_outcome_flipped_fails(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads((RESULTS / name).read_text())
    run = doc["outcomes"]["arms"]["agon"]["1"]
    run["outcomes"]["standalone:agent_a"][7] ^= 1
    flipped = tmp_path / name
    flipped.write_text(json.dumps(doc))
    with pytest.raises(VerifyError, match=r"summary\.arms\.agon\.standalone:agent_a\.per_seed\.1"):
        verify(flipped)
    assert main(["verify", str(flipped)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agon study verify: ") and "mismatch" in err and len(err.strip().splitlines()) == 1


def test_an_outcome_list_of_the_wrong_length_or_values_fails(tmp_path: Path) -> None:
    doc = json.loads((RESULTS / "study_2.json").read_text())
    doc["outcomes"]["arms"]["grpo"]["0"]["outcomes"]["standalone:agent_a"][3] = 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(VerifyError, match="values of 0, 1 or null expected"):
        verify(bad)


@pytest.mark.parametrize(("block", "name"), sorted(RECORDED.items()))
def test_a_recorded_block_regenerates_from_its_results_file(block: str, name: str) -> None:
    """``agon study report docs/results/NAME --docs docs/benchmarks.md --block BLOCK`` wrote it."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    begin, end = tables.markers(block)
    shown = re.search(re.escape(begin) + r"\n(.*?)" + re.escape(end), page, flags=re.S)
    assert shown is not None
    doc = verified(name)
    assert tables.markdown(doc, block, f"docs/results/{name}") == shown.group(1)


@pytest.mark.parametrize(("name", "least_test", "least_val", "arms"), COMPLETE)
def test_a_recorded_studys_test_problems_are_held_out(
    name: str, least_test: int, least_val: int, arms: tuple[str, ...]
) -> None:
    from agon_env.evaluation.splits import load_eval_data

    doc = verified(name)
    probs, plan = doc["problems"], doc["plan"]
    data = load_eval_data(
        "agon/arith-v0",
        {"difficulty": doc["task"]["difficulty"]},
        "test",
        plan["test_problems"],
        plan["val_problems"],
        seed=0,
    )
    assert probs["test"]["ids"] == data.test.ids() and probs["validation"]["ids"] == data.validation.ids()
    assert probs["test"]["prompt_sha256"] == [sha(data.test.task[i].prompt) for i in data.test.indices]
    assert probs["test_prompts_in_training_pool"] == 0 and probs["test_prompts_in_validation"] == 0
    assert (
        doc["complete"]
        and len(probs["test"]["ids"]) >= least_test
        and len(probs["validation"]["ids"]) >= least_val
    )
    assert all(len(doc["outcomes"]["arms"][a]) >= 3 for a in arms)


def test_the_prompts_fingerprint_is_the_recorded_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the checkable families nor a family some code registers at run time move it."""
    from agon_env.agents.prompts import PROMPT_FAMILIES, RolePrompts
    from agon_env.study.registration import prompts_fingerprint

    monkeypatch.setitem(PROMPT_FAMILIES, "fingerprint-test", RolePrompts(drafter_system="Solve."))
    assert prompts_fingerprint() == json.loads((RESULTS / "study_2.json").read_text())["plan"]["prompts"]


def test_a_comparison_added_to_a_recorded_study_is_exploratory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(RESULTS / "study_2.json"), "--compare", "agon-redacted - grpo"]) == 0
    table = capsys.readouterr().out
    assert "| agon-redacted − grpo, standalone |" in table
    row = next(line for line in table.splitlines() if line.startswith("| agon-redacted − grpo, standalone |"))
    assert "exploratory (added after the plan): " in row
    # the recorded comparisons keep the pre-registered rule's verdicts
    assert "| agon − grpo, standalone | -5.1 |" in table and "| agon worse |" in table


def test_a_unit_dropped_from_a_results_file_fails(tmp_path: Path) -> None:
    # Deleting an unfavourable seed and recomputing the summary still leaves the plan's units short.
    from agon_env.study.analysis import summary_from_outcomes

    doc = json.loads((RESULTS / "exchange_cpu.json").read_text())
    del doc["outcomes"]["arms"]["agon"]["2"]
    doc["summary"] = summary_from_outcomes(doc)
    dropped = tmp_path / "dropped.json"
    dropped.write_text(json.dumps(doc))
    with pytest.raises(VerifyError, match=r"the plan's units, recorded or missing, differ \(agon-seed2\)"):
        verify(dropped)


def test_a_results_file_whose_plan_is_not_the_registered_one_decides_nothing() -> None:
    from agon_env.study.tables import verdict_cell

    doc = json.loads((RESULTS / "study_2.json").read_text())
    doc["plan"]["comparisons"] = [["agon", "grpo"]]
    doc["hashes"] = {"plan_sha256": "a" * 64}
    doc["registration"] = {"plan_sha256": "b" * 64, "plan": {"comparisons": ["agon - grpo"]}}
    diff = doc["summary"]["paired"]["agon − grpo, standalone"]
    cell = verdict_cell(doc, "agon − grpo, standalone", diff)
    assert cell.startswith("exploratory (the plan differs from its registration): ")
    doc["hashes"] = {"plan_sha256": "b" * 64}  # equal hashes are not enough: the plan is re-hashed
    cell = verdict_cell(doc, "agon − grpo, standalone", diff)
    assert cell.startswith("exploratory (the results file differs from its registration): ")


def test_an_unfinished_studys_verdicts_say_interim_and_labels_follow_the_rules_coverage() -> None:
    from agon_env.study.analysis import summary_from_outcomes
    from agon_env.study.tables import verdict_cell

    doc = json.loads((RESULTS / "study_2.json").read_text())
    doc["plan"] |= {"comparisons": [["agon", "grpo"]], "study": {"name": "t"}}  # as agon study writes
    doc["complete"] = False  # e.g. a seed still running: the rule is for every planned seed
    diff = doc["summary"]["paired"]["agon − grpo, standalone"]
    assert "interim: agon worse" in verdict_cell(doc, "agon − grpo, standalone", diff)
    doc["plan"]["decision"] = {"confidence": 0.9}
    doc["summary"] = summary_from_outcomes(doc)
    shown = tables.markdown(doc, "study-2", "r.json")
    assert "90 % CI, seeds × problems (pp)" in shown and "95 %" not in shown
