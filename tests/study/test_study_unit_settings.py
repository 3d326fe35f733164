"""A study's results record each unit's resolved settings (its adapters' own temperatures),
not its plan's base config."""

from __future__ import annotations

import json
from pathlib import Path

from agon_env.config import TrainConfig
from agon_env.evaluation.report_file import EvalReport
from agon_env.evaluation.runs import settings_for
from agon_env.resolved import settle
from agon_env.study.results import unit_record
from agon_env.study.units import UNIT_RECORD


def test_a_unit_records_the_temperatures_its_run_resolved(tmp_path: Path) -> None:
    from agon_env.registry import make

    cfg = TrainConfig(temperatures={"agent_b": 1.1})  # the arm's override; the base samples at 0.7
    run = settle(cfg, adapters=("agent_a", "agent_b"))
    task = make(run.env_id).unwrapped.task
    settings = settings_for(run, task).describe(("agent_a", "agent_b"))
    (tmp_path / UNIT_RECORD).write_text(json.dumps({"written_at": "2026-01-01T00:00:00Z"}))
    report = EvalReport.from_document({"runs": [{"methods": {}, "settings": settings}]})
    record = unit_record(report, [], tmp_path)
    temperatures = record["settings"]["temperatures"]
    assert temperatures["agent_b"] == 1.1 and temperatures["agent_a"] == cfg.sampling.temperature
