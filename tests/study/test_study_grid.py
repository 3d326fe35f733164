"""A plan's ``grid:`` crossed with its arms: names, overrides, comparisons, errors, registration."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from agon_env.config import ConfigError
from agon_env.study import registration
from agon_env.study.commands.study import main
from agon_env.study.plan import check, from_dict, load, unit_name

ROOT = Path(__file__).resolve().parents[2]
SMOKE = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())
LRS, EXCHANGES = ("1e-4", "3e-4"), ("trace", "none")
GRID = {**SMOKE, "grid": {"optim.lr": ["1e-4", "3e-4"], "env.exchange": ["trace", "none"]}}


def test_a_two_by_two_grid_crosses_every_arm_and_names_it_from_its_values() -> None:
    plan = from_dict(copy.deepcopy(GRID))
    assert list(plan.arms) == [
        f"{arm}@lr={lr},exchange={ex}" for arm in ("grpo", "agon") for lr in LRS for ex in EXCHANGES
    ]
    configs = check(plan)
    cfg = configs["agon@lr=3e-4,exchange=none"]
    assert (cfg.algo, cfg.optim.lr, cfg.env.exchange) == ("agon", 3e-4, "none")
    # one comparison of plain arms becomes one per grid point
    assert plan.comparisons == [
        f"agon@lr={lr},exchange={ex} - grpo@lr={lr},exchange={ex}" for lr in LRS for ex in EXCHANGES
    ]
    assert unit_name("agon@lr=1e-4,exchange=trace", 0) == "agon@lr=1e-4,exchange=trace-seed0"


def test_comparisons_may_name_expanded_arms_and_the_plan_reads_back_the_same(tmp_path: Path) -> None:
    data = {
        **copy.deepcopy(GRID),
        "comparisons": ["agon@lr=1e-4,exchange=none - agon@lr=1e-4,exchange=trace"],
    }
    plan = from_dict(data)
    check(plan)
    assert plan.comparisons == data["comparisons"]
    path = tmp_path / "plan.yaml"
    path.write_text(plan.yaml())  # what a study folder stores: the expansion, read back unchanged
    assert load(path).sha256() == plan.sha256()


@pytest.mark.parametrize(
    ("grid", "says"),
    [
        ({"optim.lrr": [1e-4]}, "unknown config key 'optim.lrr'"),
        ({"optim.lr": []}, "grid.optim.lr: give a non-empty list"),
        ({"optim.lr": 1e-4}, "grid.optim.lr: give a non-empty list"),
        ({"algo": ["agon"]}, "grid.algo"),
        ({"optim.lr": [1e-4, 1.00000001e-4]}, "name one arm"),
    ],
)
def test_a_bad_grid_is_one_line_before_anything_runs(
    grid: dict, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**SMOKE, "grid": grid}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and str(path) in err
    assert not out.exists()


def test_registration_freezes_the_expansion(tmp_path: Path) -> None:
    plan = from_dict(copy.deepcopy(GRID))
    reg, new = registration.register(plan, tmp_path)
    assert new and set(reg.plan["arms"]) == set(plan.arms) and len(plan.arms) == 8
    wider = copy.deepcopy(GRID)
    wider["grid"]["optim.lr"].append("1e-3")
    with pytest.raises(ConfigError, match="arms"):
        registration.check(from_dict(wider), tmp_path)
