"""Which problems an evaluation reports on (test) and which it may tune on (validation).

Both come from one task built from a registered id (any ``agon_env.make``-able task,
including ``agon/math-v0`` over a local file with a field mapping). The validation
problems are a seeded sample of indices disjoint from the test sample, so:

* no task needs a separate validation split on disk (GSM8K, a user's JSONL);
* the two sets are disjoint by construction, and
  :func:`~agon_env.evaluation.selection.check_disjoint` re-checks it by problem id
  (a dataset with duplicated ids fails loudly instead of leaking).
"""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field
from typing import Any

import agon_env
from agon_env.envs.tasks.base import Task
from agon_env.registry import ENV_KWARGS
from agon_env.seeding import derive_seed


@dataclass
class EvalData:
    """A task, the env id it came from, and the test / validation problem indices."""

    env_id: str
    task: Task
    test_indices: list[int]
    val_indices: list[int]
    task_kwargs: dict[str, Any] = field(default_factory=dict)

    def env(self, mode: str) -> Any:
        """A template env in ``mode`` over this task (reward scheme is irrelevant to accuracy)."""
        return agon_env.make(self.env_id, task=self.task, mode=mode)

    def problem_ids(self, indices: list[int]) -> list[str]:
        return [str(self.task[i].id) for i in indices]

    def describe(self) -> dict[str, Any]:
        return {
            "env": self.env_id,
            "task": getattr(self.task, "name", type(self.task).__name__),
            "task_kwargs": {k: v for k, v in self.task_kwargs.items() if _jsonable(v)},
            "task_size": len(self.task),
            "test_problems": len(self.test_indices),
            "validation_problems": len(self.val_indices),
        }


def _jsonable(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool, type(None)))


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def build_task(env_id: str, task_kwargs: dict[str, Any] | None = None, split: str | None = "test") -> Task:
    """The task behind ``env_id``, on ``split`` when its constructor takes one.

    Env-level keys (``mode``, ``lam``, ...) are dropped: evaluation picks the mode per method.
    """
    spec = agon_env.spec(env_id)
    kwargs = {**spec.kwargs, **(task_kwargs or {})}
    kwargs = {k: v for k, v in kwargs.items() if k not in ENV_KWARGS}
    entry = spec.load()
    if split is not None and "split" not in kwargs and _accepts(entry, "split"):
        kwargs["split"] = split
    task = entry(**kwargs)
    if not (hasattr(task, "score") and hasattr(task, "__getitem__") and hasattr(task, "__len__")):
        raise TypeError(f"{env_id} builds a {type(task).__name__}, not a task; agon eval needs a task id")
    return task


def sample_indices(size: int, n_test: int, n_val: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """Disjoint seeded samples of ``n_test`` and ``n_val`` indices out of ``range(size)``, sorted."""
    if n_test < 1:
        raise ValueError(f"need at least one test problem, got {n_test}")
    if n_val < 0:
        raise ValueError(f"validation problems must be >= 0, got {n_val}")
    if n_test + n_val > size:
        raise ValueError(
            f"the task has {size} problems, fewer than {n_test} test + {n_val} validation; "
            "lower --problems / --val-problems"
        )
    chosen = random.Random(derive_seed(seed, "eval-problems")).sample(range(size), n_test + n_val)
    return sorted(chosen[:n_test]), sorted(chosen[n_test:])


def load_eval_data(
    env_id: str,
    task_kwargs: dict[str, Any] | None = None,
    split: str | None = "test",
    problems: int = 100,
    val_problems: int = 50,
    seed: int = 0,
) -> EvalData:
    task = build_task(env_id, task_kwargs, split)
    test, val = sample_indices(len(task), min(problems, len(task)), val_problems, seed)
    kwargs = dict(task_kwargs or {})
    if split is not None:
        kwargs.setdefault("split", split)
    return EvalData(env_id, task, test, val, kwargs)
