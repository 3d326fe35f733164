"""TRL's dataset on every registered task: each row gives back the task's problem."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import agon_env
from agon_env.envs.tasks.data import offline_status
from agon_env.envs.tasks.fixtures import write_deepmath_fixture
from agon_env.integrations.trl import dataset, meta_of, plain, reward_function

ROWS = 300
"""Enough rows for a task whose meta mixes value types to show it (pyfunc's ``k``: an int for
``add_k``, a str for ``starts_with``, within its first rows)."""
GIVEN: dict[str, Callable[[Path], dict[str, object]]] = {
    "agon/math-v0": lambda _: {
        "problems": [{"question": "1+1", "answer": "2"}, {"question": "2+3", "answer": "5"}]
    },
    "agon/deepmath-v0": lambda tmp: {"path": str(write_deepmath_fixture(tmp / "deepmath.parquet"))},
}
"""Tasks built from a path or the hub, given their problems here instead."""


def _kwargs(env_id: str, tmp: Path) -> dict[str, object] | None:
    if env_id in GIVEN:
        return GIVEN[env_id](tmp)
    return {} if offline_status(agon_env.spec(env_id)) == "yes" else None


@pytest.mark.parametrize("env_id", agon_env.registered_ids())
def test_every_registered_tasks_problems_come_back_from_its_dataset(env_id, tmp_path):
    kwargs = _kwargs(env_id, tmp_path)
    if kwargs is None:
        pytest.skip(f"{env_id}: {offline_status(agon_env.spec(env_id))}")
    # split=None: the task's own default split (HumanEval has only test).
    rows = dataset(env_id, split=None, limit=ROWS, **kwargs)
    task = agon_env.make(env_id, **kwargs).unwrapped.task
    assert len(rows) == min(ROWS, len(task))
    for i, row in enumerate(rows):
        p = task[i]
        assert (row["problem_id"], row["answer"]) == (p.id, plain(p.answer))
        assert meta_of(row.get("meta")) == p.meta


def test_a_meta_cell_is_read_as_text_or_as_a_mapping():
    assert meta_of('{"k": 2}') == meta_of({"k": 2}) == {"k": 2}
    assert meta_of(None) == {}
    with pytest.raises(ValueError, match="JSON object"):
        meta_of("[1, 2]")


@pytest.mark.parametrize("env_id", ["agon/pyfunc-v0", "agon/codecontests-v0"])
def test_a_code_tasks_reference_scores_right_from_its_rows_columns(env_id, tmp_path):
    # CodeContests' cases reach the reward as plain mappings, pyfunc's meta as JSON text.
    if _kwargs(env_id, tmp_path) is None:
        pytest.skip(f"{env_id}: {offline_status(agon_env.spec(env_id))}")
    rows = dataset(env_id, split=None, limit=2)
    reward = reward_function(env_id)
    texts = [f"<summary>s</summary><answer>{r['answer']['reference']}</answer>" for r in rows]
    columns = {k: rows[k] for k in ("answer", "meta", "problem_id")}
    assert reward(rows["prompt"], texts, **columns) == [2.5, 2.5]
