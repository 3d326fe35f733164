"""MBPP (``agon/mbpp-v0``): a Python program defining a function, checked with the row's asserts.

The prompt shows the task text and the *first* assert as a signature hint (standard MBPP practice:
without it the expected name and argument order are guesswork); all asserts of ``test_list`` are
scored, the first included. ``challenge_test_list`` is not used.

One MBPP problem (``mbpp/12``) as the model sees it::

    Write a function to sort a given matrix in ascending order according to the sum of its rows.

    Your code should pass this test:

    ```python
    assert sort_matrix([[1, 2, 3], [2, 4, 5], [1, 1, 1]])==[[1, 1, 1], [1, 2, 3], [2, 4, 5]]
    ```

    Answer with a Python program that defines the function (with any imports it needs). It is run
    and then checked with hidden asserts like the one above.

Its gold answer is a test bundle, not a text: ``{"setup": "", "tests": [the three asserts of
test_list], "reference": "def sort_matrix(M):\\n    result = sorted(M, key=sum)\\n    ..."}``.

The splits are the upstream task-id ranges (:data:`MBPP_SPLITS`), less validation and train rows
restating an earlier split's task text, so no normalised prompt is in two splits.
"""

from __future__ import annotations

from agon_env.envs.tasks.base import SPLITS, Problem, check_split, normalize_prompt
from agon_env.envs.tasks.code import CodeTask, take
from agon_env.envs.tasks.code_checks import CheckReport, check_asserts, strip_code_fence
from agon_env.envs.tasks.data import load_rows, local_file
from agon_env.json_value import JSONRecord
from agon_env.sandbox import Limits

_MBPP_PROMPT = """{text}

Your code should pass this test:

```python
{first_test}
```

Answer with a Python program that defines the function (with any imports it needs). It is run and \
then checked with hidden asserts like the one above."""

MBPP_SPLITS = {"test": (11, 510), "validation": (511, 600), "train": (601, 10**9)}
"""The upstream task-id ranges; ids 1-10 are the few-shot prompt rows, in no split."""
_MBPP_HUB_SPLITS = "train+validation+test+prompt"  # every row: the split is decided by task id here


def mbpp_split(task_id: int) -> str | None:
    """The split of an MBPP task id (``None`` for the few-shot prompt rows 1-10)."""
    return next((name for name, (lo, hi) in MBPP_SPLITS.items() if lo <= task_id <= hi), None)


def _mbpp_rows(rows: list[JSONRecord], split: str | None) -> list[JSONRecord]:
    """The rows of ``split``, less those restating the task text of an earlier one (test, validation)."""
    if split is None:
        return rows
    earlier = SPLITS[SPLITS.index(split) + 1 :]
    taken = {normalize_prompt(r["text"]) for r in rows if mbpp_split(int(r["task_id"])) in earlier}
    return [
        r for r in rows if mbpp_split(int(r["task_id"])) == split and normalize_prompt(r["text"]) not in taken
    ]


def load_mbpp_problems(
    path: str | None = None, split: str | None = "train", limit: int | None = None
) -> list[Problem]:
    """MBPP on the upstream split by task id (:data:`MBPP_SPLITS`; ``None``: every row).

    Rows come from ``path``, else the offline ``mbpp.jsonl``, else the hub (all of its splits,
    so the task ids decide, as for a file).
    """
    check_split(split)
    source = path or local_file("mbpp.jsonl")
    if source is not None:
        rows = load_rows(source)
    else:
        rows = load_rows("google-research-datasets/mbpp", split=_MBPP_HUB_SPLITS, name="full")
    return [
        Problem(
            id=f"mbpp/{r['task_id']}",
            prompt=_MBPP_PROMPT.format(text=r["text"].strip(), first_test=r["test_list"][0]),
            answer={
                "setup": r.get("test_setup_code") or "",
                "tests": list(r["test_list"]),
                "reference": r["code"],
            },
            meta={"task_id": int(r["task_id"]), "source": "mbpp"},
        )
        for r in take(_mbpp_rows(rows, split), limit)
    ]


class MBPPTask(CodeTask):
    """Runs the answer, then the row's setup code and every assert of ``test_list``."""

    name = "mbpp"
    prompt_family = "code-function"

    def run_checks(
        self, problem: Problem, answer: str, limits: Limits, measuring: bool = False
    ) -> CheckReport:
        bundle = problem.answer
        return check_asserts(strip_code_fence(answer), bundle["tests"], bundle["setup"], limits)


def mbpp(
    path: str | None = None,
    split: str | None = "train",
    limit: int | None = None,
    limits: Limits | None = None,
) -> MBPPTask:
    """``agon/mbpp-v0``."""
    return MBPPTask(load_mbpp_problems(path, split, limit), limits)
