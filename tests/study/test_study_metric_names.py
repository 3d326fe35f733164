"""The study names the training metrics it reads as the trainer logs them: from
agon_env/metric_names.py, never as its own string literals (a renamed metric would otherwise read
as "not logged", – in every table, without an error)."""

from __future__ import annotations

import ast
from pathlib import Path

from agon_env import metric_names
from agon_env.study.analysis import PER_STEP, TRAINING_RATES
from agon_env.vocabulary import ROLES, SEATS

STUDY = Path(__file__).resolve().parents[2] / "agon_env" / "study"


def test_the_training_metrics_the_study_reads_are_the_trainers_names() -> None:
    quantities = {v for k, v in vars(metric_names).items() if k.isupper() and isinstance(v, str)}
    logged = quantities | {metric_names.key(q, who) for q in quantities for who in (*ROLES, *SEATS)}
    assert set(TRAINING_RATES) | set(PER_STEP) <= logged


def test_no_study_module_spells_a_metric_name_itself() -> None:
    names = set(TRAINING_RATES) | set(PER_STEP)
    found = [
        f"{path.name}:{node.lineno} {node.value!r}"
        for path in sorted(STUDY.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert found == []
