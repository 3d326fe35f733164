"""Every shipped plan loads and validates; a plan's mistakes are one line and write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agon_env.config import ConfigError
from agon_env.study.commands.study import main
from agon_env.study.plan import StudyPlan, check, load, split
from agon_env.study.results import plan_record

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "studies").glob("*.yaml"))


def test_the_four_plans_ship() -> None:
    names = {p.name for p in SHIPPED}
    assert {
        "smoke.yaml",
        "smollm2-arith.yaml",
        "paper-deepmath-qwen3-0.6b.yaml",
        "paper-codecontests-qwen3-1.7b.yaml",
    } <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_shipped_plan_loads_and_every_arm_resolves(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # a plan's config preset is a path from the repository root
    plan = load(path)
    configs = check(plan)  # each arm as `agon train` validates it; hub-backed ids included
    assert set(configs) == set(plan.arms) and plan.seeds
    for first, second in plan.pairs("comparisons") + plan.pairs("exploratory"):
        assert first in plan.arms and second in plan.arms
    if path.stem.startswith("paper-"):
        header = path.read_text().split("\nname:")[0]
        assert "A FIGURE ON PAPER" in header and "GPU-hours" in header
        assert len(plan.seeds) == 3 and plan.evaluation.test_problems == 300


def test_the_second_study_ships_as_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """What studies/smollm2-arith.yaml resolves to is what docs/results/study_2.json recorded."""
    monkeypatch.chdir(ROOT)
    plan = load(ROOT / "studies" / "smollm2-arith.yaml")
    recorded = json.loads((ROOT / "docs" / "results" / "study_2.json").read_text())
    now = plan_record(plan)
    for key in (
        "model",
        "env",
        "steps",
        "batch_problems",
        "num_generations",
        "max_new_tokens",
        "temperature",
        "lr",
        "arms",
        "seeds",
        "test_problems",
        "val_problems",
        "eval_seeds",
    ):
        assert now[key] == recorded["plan"][key], key
    assert now["two_stage"] == {
        "grpo": "self-cascade",
        "coop": "cascade",
        "agon": "cascade",
        "agon-redacted": "cascade",
    }
    assert plan.calibration is not None and plan.calibration.candidates == [recorded["task"]["difficulty"]]
    assert plan.calibration.problems == recorded["plan"]["calibration_problems"]
    redacted = plan.unit_config("agon-redacted", 0)
    assert (redacted.algo, redacted.env.exchange) == ("agon", "redacted")  # redact_answer=True, today
    assert plan.pairs("comparisons") == [("agon", "grpo"), ("agon", "coop")]  # section 3's four


def test_a_comparison_is_arm_minus_arm() -> None:
    assert split("agon-none - agon") == ("agon-none", "agon")
    assert split("agon − grpo") == ("agon", "grpo")
    with pytest.raises(ConfigError, match="ARM - ARM"):
        split("agon-grpo")


def _write(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())
    for key, value in changes.items():
        data[key] = value
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arm": {}}, "plan key 'arm' is unknown; did you mean arms"),
        (
            {"arms": {"agon": {"algo": "agonn"}}},
            "arm 'agon': invalid training config: algo: unknown algorithm 'agonn'",
        ),
        (
            {"arms": {"agon": {"algo": "agon", "env.exchang": "none"}}},
            "arm 'agon': unknown config key 'env.exchang'",
        ),
        ({"comparisons": ["agon - coop"]}, "names 'coop', not an arm of the plan"),
        ({"evaluation": {"test_problems": "many"}}, "evaluation.test_problems: expected int"),
        ({"evaluation": {"methods": ["cascad"]}}, "unknown eval method 'cascad'"),
        ({"decision": {"confidence": 95}}, "decision.confidence: 95 is no coverage"),
        ({"decision": {"equivalence_margin": 3}}, "decision.equivalence_margin: 3 is no margin in pass@1"),
        (
            {"calibration": {"keyword": "difficulti", "candidates": [2]}},
            "calibration.keyword 'difficulti': agon/arith-v0 takes no such keyword",
        ),
        # issue #46: each of these failed only after every unit had trained, or counted a unit twice
        ({"evaluation": {"test_problems": 0}}, "evaluation.test_problems: 0; every unit is scored"),
        (
            {"evaluation": {"val_problems": 0}},
            "evaluation.val_problems: 0, but arm 'agon' evaluates a cascade",
        ),
        ({"seeds": [0, 0]}, "seeds: 0 is listed twice in [0, 0]"),
        ({"evaluation": {"seeds": []}}, "evaluation.seeds: []; give distinct sampling seeds"),
        ({"calibration": {"candidates": [1], "problems": 0}}, "calibration.problems: 0"),
    ],
)
def test_a_bad_plan_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, message: str
) -> None:
    out = tmp_path / "study"
    assert main(["run", str(_write(tmp_path, **changes)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_every_field_is_documented_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "--workers" in shown and "--launcher" in shown and "resumes a killed study" in shown
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {sub} " in listed for sub in ("register", "run", "report", "verify"))


def test_a_plans_hash_ignores_layout_but_not_content() -> None:
    a = StudyPlan(arms={"agon": {"algo": "agon"}})
    assert a.sha256() == StudyPlan(arms={"agon": {"algo": "agon"}}).sha256()
    assert a.sha256() != StudyPlan(arms={"agon": {"algo": "agon"}}, seeds=[0]).sha256()


def test_a_unit_runs_all_its_steps_whatever_the_plan_says() -> None:
    # A unit stopped early would be evaluated as it was, and resumed past its stop after a kill.
    told = {"stop_if_not_learning": True, "time_budget_min": 5}
    plan = StudyPlan(arms={"agon": {"algo": "agon"}}, train=told)
    unit = plan.unit_config("agon", 0)
    assert unit.stop_if_not_learning is False and unit.time_budget_min == 0
