"""A preset with several typos names every one of them, not the first only."""

from __future__ import annotations

from pathlib import Path

import pytest

from agon_env.config import ConfigError, preset_config


def test_a_preset_with_three_typos_reports_all_three(tmp_path: Path) -> None:
    preset = tmp_path / "typos.yaml"
    preset.write_text("stpes: 3\noptim:\n  lrr: 0.1\ngrpo:\n  num_generation: 4\n")
    with pytest.raises(ConfigError) as refused:
        preset_config(str(preset))
    said = str(refused.value)
    for typo, fix in (
        ("stpes", "steps"),
        ("optim.lrr", "optim.lr"),
        ("grpo.num_generation", "grpo.num_generations"),
    ):
        assert f"unknown config key {typo!r}: did you mean {fix}" in said
    assert "\n" not in said
