"""One set of plan checks (issue #57 item 5): ``run`` refuses what ``register`` refuses, and a grid
value spelled two ways is one value."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from agon_env.config import ConfigError
from agon_env.study import launchers, registration
from agon_env.study.commands.study import main
from agon_env.study.plan import from_dict

ROOT = Path(__file__).resolve().parents[2]
SMOKE = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())
NARROW = {**SMOKE, "decision": {"equivalence_margin": 0.05}}
"""±5 pp at 2 seeds × 6 problems: far below what the plan can detect (±57 pp at a 50 % base)."""


def test_admissible_is_the_registration_check(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="±5 pp is below the smallest difference"):
        registration.admissible(from_dict(copy.deepcopy(NARROW)))
    power = registration.admissible(from_dict(copy.deepcopy(SMOKE)))
    assert power["pairs"] == 12 and power["difference"] > 0.5


def test_run_refuses_unregistered_what_register_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []
    # were the plan accepted, no unit would really train: the launcher only records the call
    monkeypatch.setitem(launchers.LAUNCHERS, "local", lambda specs, **kw: ran.extend(specs) or {})
    path = tmp_path / "narrow.yaml"
    path.write_text(yaml.safe_dump(NARROW))
    assert main(["register", str(path), "--out", str(tmp_path / "reg")]) == 2
    refused = capsys.readouterr().err
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "decision.equivalence_margin: ±5 pp is below the smallest difference" in err
    said = [e.strip().splitlines()[-1].partition(": ")[2] for e in (err, refused)]
    assert said[0] == said[1]  # the same line, after the command's name
    assert ran == [] and not out.exists()


def test_grid_values_equal_once_parsed_are_refused_naming_both() -> None:
    data = {**copy.deepcopy(SMOKE), "grid": {"optim.lr": ["1e-4", 0.0001]}}
    with pytest.raises(ConfigError, match=r"grid.optim.lr: '1e-4' and 0.0001 are one value once parsed"):
        from_dict(data)
    data = {**copy.deepcopy(SMOKE), "grid": {"optim.lr": ["1e-4", "5e-4"]}}
    assert len(from_dict(data).arms) == 4  # distinct values still cross


def test_every_grid_value_is_checked_not_only_the_first() -> None:
    data = {**copy.deepcopy(SMOKE), "grid": {"optim.lr": [1e-4, "fast"]}}
    with pytest.raises(ConfigError, match=r"optim\.lr"):
        from_dict(data)
