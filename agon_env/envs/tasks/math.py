"""Math tasks: ``agon/math-v0`` from memory, a local file or a hub id, and its variants.

:class:`MathTask` maps rows to :class:`Problem` with ``question_field`` / ``answer_field``
and checks answers with :func:`agon_env.envs.tasks.verify.answers_match`. The variants
are thin functions over it:

* :func:`gsm8k` -- the final answer after ``####``, commas stripped.
* :func:`deepmath` -- DeepMath-103K (``zwhe99/DeepMath-103K`` or a local copy), keeping
  ``difficulty >= min_difficulty`` (8 by default) and dropping yes/no/true/false answers,
  as the paper does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.envs.tasks.data import load_rows, local_file
from agon_env.envs.tasks.verify import BINARY, answers_match

AnswerFn = Callable[[Any], str]


def rows_to_problems(
    rows: Iterable[Mapping[str, Any]],
    question_field: str = "question",
    answer_field: str = "answer",
    id_field: str | None = None,
    answer_fn: AnswerFn | None = None,
    prefix: str = "",
) -> list[Problem]:
    """Rows to problems; a row missing a field fails with its number and the field name."""
    problems = []
    for i, row in enumerate(rows):
        for f in (question_field, answer_field):
            if f not in row or row[f] is None:
                raise KeyError(f"row {i} has no field {f!r} (fields: {sorted(row)})")
        gold = answer_fn(row[answer_field]) if answer_fn else str(row[answer_field]).strip()
        pid = str(row[id_field]) if id_field and id_field in row else f"{prefix}{i}"
        meta = {k: v for k, v in row.items() if k not in (question_field, answer_field)}
        problems.append(Problem(id=pid, prompt=str(row[question_field]).strip(), answer=gold, meta=meta))
    return problems


class MathTask(ListTask):
    """Problems with a single final answer, verified by math-verify."""

    def __init__(
        self,
        problems: Sequence[Mapping[str, Any]] | None = None,
        path: str | Path | None = None,
        split: str = "train",
        question_field: str = "question",
        answer_field: str = "answer",
        id_field: str | None = None,
        answer_fn: AnswerFn | None = None,
        row_filter: Callable[[Mapping[str, Any]], bool] | None = None,
        limit: int | None = None,
        name: str = "math",
        verify_timeout: float = 5.0,
    ) -> None:
        if (problems is None) == (path is None):
            raise ValueError(
                "give exactly one of problems=[{...}] or path= (a local file or a hub dataset id)"
            )
        rows: Sequence[Mapping[str, Any]] = problems if problems is not None else load_rows(path, split=split)  # type: ignore[arg-type]
        if row_filter is not None:
            rows = [r for r in rows if row_filter(r)]
        if limit is not None:
            rows = list(rows)[:limit]
        super().__init__(rows_to_problems(rows, question_field, answer_field, id_field, answer_fn), name=name)
        self.verify_timeout = verify_timeout

    def score(self, problem: Problem, answer: str) -> bool:
        return answers_match(problem.answer, answer, timeout=self.verify_timeout)


def gsm8k_final_answer(solution: str) -> str:
    """The number after ``####`` in a GSM8K solution, thousands separators removed."""
    if "####" not in solution:
        raise ValueError(f"GSM8K answer without '####': {solution[-80:]!r}")
    return solution.split("####")[-1].strip().replace(",", "")


def gsm8k(path: str | Path | None = None, split: str = "test", **kwargs: Any) -> MathTask:
    """GSM8K from ``path``, the offline copy (``gsm8k_{split}.jsonl``) or the hub (``openai/gsm8k``)."""
    if path is None:
        path = local_file(f"gsm8k_{split}.jsonl")
    if path is None:
        rows = load_rows("openai/gsm8k", split=split, name="main")
        return MathTask(problems=rows, answer_fn=gsm8k_final_answer, name="gsm8k", **kwargs)
    return MathTask(path=path, split=split, answer_fn=gsm8k_final_answer, name="gsm8k", **kwargs)


def deepmath(
    path: str | Path | None = None,
    split: str = "train",
    min_difficulty: float = 8.0,
    drop_binary: bool = True,
    **kwargs: Any,
) -> MathTask:
    """DeepMath-103K filtered as in the paper (hard problems, no binary answers)."""

    def keep(row: Mapping[str, Any]) -> bool:
        hard = float(row.get("difficulty") or 0) >= min_difficulty
        binary = str(row.get("final_answer", "")).strip().lower() in BINARY
        return hard and not (drop_binary and binary)

    return MathTask(
        path=path or "zwhe99/DeepMath-103K",
        split=split,
        question_field="question",
        answer_field="final_answer",
        row_filter=keep,
        name="deepmath",
        **kwargs,
    )
