"""Math tasks: ``agon/math-v0`` from memory, a local file or a hub id, and its variants.

Loading and scoring are separate: :func:`load_math_problems` turns rows into
:class:`Problem` objects (field mapping, answer extraction, filter, limit) and
:class:`MathTask` only holds problems and checks answers with
:func:`agon_env.envs.tasks.verify.answers_match`. The registered entry points are small
factories over both:

* :func:`math_task` -- ``agon/math-v0``: ``problems=[{question, answer}]`` or ``path=``.
* :func:`gsm8k` -- ``agon/gsm8k-v0``: the final answer after ``####``, commas stripped.
* :func:`deepmath` -- ``agon/deepmath-v0``: DeepMath-103K (``zwhe99/DeepMath-103K`` or a
  local copy), keeping ``difficulty >= min_difficulty`` (8 by default) and dropping
  yes/no/true/false answers, as the paper does.

Splits (``split=``, one of train / validation / test): sources without official held-out
splits -- ``agon/math-v0`` rows or files, DeepMath (the hub has only ``train``) -- are
*carved* by content (:func:`~agon_env.envs.tasks.base.content_split`: a hash of the
normalised question), so no question is in two splits and training never sees a
held-out one. GSM8K keeps its official test split; its validation split is carved out of
the official train split, and its train split is the rest. ``split=None`` keeps every row.

One GSM8K problem as the model sees it (the prompt is the question, verbatim)::

    Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and
    bakes muffins for her friends every day with four. She sells the remainder at the
    farmers' market daily for $2 per fresh duck egg. How much in dollars does she make
    every day at the farmers' market?

Gold answer: ``"18"`` (from ``... #### 18``); ``"$18"`` or ``"18.0"`` also score correct.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agon_env.envs.tasks.base import ListTask, Problem, check_split, content_split
from agon_env.envs.tasks.data import load_rows, local_file
from agon_env.envs.tasks.verify import BINARY, answers_match
from agon_env.json_value import JSONValue

AnswerFn = Callable[[JSONValue], str]
RowFilter = Callable[[Mapping[str, JSONValue]], bool]
Rows = Iterable[Mapping[str, JSONValue]]


def load_math_problems(
    source: str | os.PathLike[str] | Rows,
    *,
    question_field: str = "question",
    answer_field: str = "answer",
    id_field: str | None = None,
    answer_fn: AnswerFn | None = None,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
    split: str = "train",
    keep_prompt: Callable[[str], bool] | None = None,
) -> list[Problem]:
    """Problems from in-memory rows, or from a local file / hub id read on ``split``.

    ``row_filter`` (on rows) and ``keep_prompt`` (on the question, e.g. a content split)
    run before ``limit``, so ``limit`` counts kept rows. A kept row missing a field fails
    with its number and the field name. Without ``id_field`` a problem's id is its
    position among the rows before ``keep_prompt``, so ids do not depend on the split.
    """
    rows: Rows = load_rows(source, split=split) if isinstance(source, (str, os.PathLike)) else source
    if row_filter is not None:
        rows = [r for r in rows if row_filter(r)]
    problems = []
    for i, row in enumerate(rows):
        for f in (question_field, answer_field):
            if f not in row or row[f] is None:
                raise KeyError(f"row {i} has no field {f!r} (fields: {sorted(row)})")
        gold = answer_fn(row[answer_field]) if answer_fn else str(row[answer_field]).strip()
        pid = str(row[id_field]) if id_field and id_field in row else str(i)
        prompt = str(row[question_field]).strip()
        if keep_prompt is not None and not keep_prompt(prompt):
            continue
        meta = {k: v for k, v in row.items() if k not in (question_field, answer_field)}
        problems.append(Problem(id=pid, prompt=prompt, answer=gold, meta=meta))
        if limit is not None and len(problems) == limit:
            break
    return problems


def in_split(split: str | None) -> Callable[[str], bool] | None:
    """The ``keep_prompt`` of a carved split (``None``: every prompt)."""
    check_split(split)
    return None if split is None else (lambda prompt: content_split(prompt) == split)


class MathTask(ListTask):
    """Problems with a single final answer (a gold string), verified by math-verify."""

    prompt_family = "math"

    def __init__(self, problems: Sequence[Problem], name: str = "math", verify_timeout: float = 5.0) -> None:
        super().__init__(problems, name=name)
        self.verify_timeout = verify_timeout

    def score(self, problem: Problem, answer: str) -> bool:
        return answers_match(problem.answer, answer, timeout=self.verify_timeout)


def math_task(
    problems: Sequence[Mapping[str, JSONValue]] | None = None,
    path: str | Path | None = None,
    split: str | None = None,
    name: str = "math",
    verify_timeout: float = 5.0,
    source_split: str = "train",
    **load: Any,
) -> MathTask:
    """``agon/math-v0``: rows given as ``problems=`` or read from ``path=`` (file or hub id).

    ``split`` carves the rows by content (``None``: all of them); ``source_split`` is the
    split of a hub dataset to read them from. ``load`` goes to :func:`load_math_problems`
    (``question_field``, ``answer_field``, ``id_field``, ``answer_fn``, ``row_filter``,
    ``limit``, or a ``keep_prompt`` of the caller's instead of the split's).
    """
    if (problems is None) == (path is None):
        raise ValueError("give exactly one of problems=[{...}] or path= (a local file or a hub dataset id)")
    source: str | Path | Rows = problems if problems is not None else path  # type: ignore[assignment]
    load.setdefault("keep_prompt", in_split(split))
    loaded = load_math_problems(source, split=source_split, **load)
    if not loaded:
        raise ValueError(f"{name}: no problems in split {split!r} (of {path or 'the given rows'})")
    return MathTask(loaded, name=name, verify_timeout=verify_timeout)


def gsm8k_final_answer(solution: str) -> str:
    """The number after ``####`` in a GSM8K solution, thousands separators removed."""
    if "####" not in solution:
        raise ValueError(f"GSM8K answer without '####': {solution[-80:]!r}")
    return solution.split("####")[-1].strip().replace(",", "")


def gsm8k(path: str | Path | None = None, split: str = "test", **kwargs: Any) -> MathTask:
    """GSM8K from ``path``, the offline copy (``gsm8k_{train,test}.jsonl``) or the hub (``openai/gsm8k``).

    ``test`` is the official test split; ``validation`` is carved out of the official
    train split by content and ``train`` is the rest of it. ``kwargs`` go to
    :func:`math_task` (``limit``, ``verify_timeout``, ...).
    """
    check_split(split)
    source_split = "test" if split == "test" else "train"
    keep: Callable[[str], bool] | None = None
    if split == "validation":
        keep = in_split("validation")
    elif split == "train":
        keep = lambda prompt: content_split(prompt) != "validation"  # noqa: E731
    if path is None:
        path = local_file(f"gsm8k_{source_split}.jsonl")
    source: dict[str, object] = (
        {"problems": load_rows("openai/gsm8k", split=source_split, name="main")}
        if path is None
        else {"path": path}
    )
    return math_task(
        **source,
        source_split=source_split,
        answer_fn=gsm8k_final_answer,
        name="gsm8k",
        keep_prompt=keep,
        **kwargs,
    )


def deepmath(
    path: str | Path | None = None,
    split: str = "train",
    min_difficulty: float = 8.0,
    drop_binary: bool = True,
    **kwargs: Any,
) -> MathTask:
    """DeepMath-103K filtered as in the paper (hard problems, no binary answers)."""

    def keep(row: Mapping[str, JSONValue]) -> bool:
        hard = float(row.get("difficulty") or 0) >= min_difficulty
        binary = str(row.get("final_answer", "")).strip().lower() in BINARY
        return hard and not (drop_binary and binary)

    return math_task(
        path=path or "zwhe99/DeepMath-103K",
        split=split,  # carved by content: the hub dataset has only a train split
        source_split="train",
        question_field="question",
        answer_field="final_answer",
        row_filter=keep,
        name="deepmath",
        **kwargs,
    )
