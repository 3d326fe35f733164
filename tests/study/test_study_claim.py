"""A study folder's claim on its first run (agon_env/study/registration.py ``claim``): the plan and
the prompts it runs under, refused when another plan or other prompts come to the same folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agon_env.config import ConfigError
from agon_env.study import registration
from agon_env.study.plan import from_dict, load

ROOT = Path(__file__).resolve().parents[2]
SMOKE = yaml.safe_load((ROOT / "studies" / "smoke.yaml").read_text())


def test_a_started_folder_refuses_another_plan_and_other_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = from_dict(SMOKE)
    registration.claim(plan, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml", "study.json"]
    registration.claim(plan, tmp_path)  # the same plan again: a resumed run
    assert load(tmp_path / "plan.yaml").sha256() == plan.sha256()
    other = from_dict(SMOKE | {"seeds": [0]})
    with pytest.raises(ConfigError, match="holds a study of another plan"):
        registration.claim(other, tmp_path)
    monkeypatch.setattr(registration, "prompts_fingerprint", lambda: "0" * 16)
    with pytest.raises(ConfigError, match="ran its units under other prompts"):
        registration.claim(plan, tmp_path)
