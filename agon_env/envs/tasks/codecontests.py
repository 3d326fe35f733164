"""CodeContests (``agon/codecontests-v0``): a full Python 3 program on stdin/stdout.

The answer runs on each ``{input, output}`` test and its output is compared token by token.
Problems whose statement grants an "absolute or relative error" are compared with that float
tolerance. Each case is bounded by its (scaled, :mod:`~agon_env.envs.tasks.code`) ``wall_s`` and
the whole answer by :meth:`CodeContestsTask.budget_s` plus one case; the first failing case ends
the check (``fail_fast``).

The hub's rows have official splits (:data:`CC_HUB_SPLITS`); a local file (the offline sample,
all from the hub's train split) records none and is carved by
:func:`~agon_env.envs.tasks.base.content_split`, so a statement that appears under two ids lands
in one split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from agon_env.envs.tasks.base import Problem, check_split, content_split
from agon_env.envs.tasks.code import TIME_SCALE, CodeTask, TimeScale, reference_check, take
from agon_env.envs.tasks.code_checks import (
    CheckReport,
    IOCase,
    check_stdio,
    strip_code_fence,
    tolerance_from_statement,
)
from agon_env.envs.tasks.data import load_rows, local_file
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.sandbox import Limits, SandboxPool

# The CPU limit under which the sample's ref_all_pass was recorded, and the limit of a problem whose
# reference cannot be measured; others get a multiple of their reference's time (code.TimeScale).
# fail_fast and total_wall_s keep a wrong answer's cost to one timed-out case.
STDIO_LIMITS = Limits(cpu_s=10, wall_s=20.0)
MEASURE_TOTAL_S = 300.0
"""Wall seconds a reference's measurement may take over all its cases (then it is unmeasured and
the problem keeps the fixed limits)."""

_CC_PROMPT = """{description}

Answer with a complete Python 3 program that reads the input from standard input and prints the \
answer to standard output."""

_PYTHON3 = 3  # CodeContests' Language enum: 1 is Python 2, 3 is Python 3


def codecontests_row(row: Mapping[str, JSONValue], max_tests: int = 10) -> JSONRecord:
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
    return take((p for p in problems if carve is None or content_split(p.prompt) == carve), limit)


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
        time_scale: TimeScale | None = TIME_SCALE,
    ) -> None:
        self.total_wall_s = total_wall_s
        self.workers = workers
        self._pool: SandboxPool | None = None
        super().__init__(problems, limits, time_scale)

    def check(self, problem: Problem, answer: str, fail_fast: bool = True) -> CheckReport:
        measured = reference_check(self, problem, answer)  # every case already ran: no fail-fast
        if measured is not None:
            return measured
        return self.run_checks(problem, answer, self.limits_for(problem), fail_fast=fail_fast)

    def run_checks(
        self,
        problem: Problem,
        answer: str,
        limits: Limits,
        measuring: bool = False,
        fail_fast: bool = True,
    ) -> CheckReport:
        if self._pool is None:
            self._pool = SandboxPool(self.workers)
        tol = problem.answer["tolerance"] or 0.0
        # Cases as plain mappings too: TRL's dataset stores them so (Arrow holds no IOCase).
        cases = [IOCase(**c) if isinstance(c, Mapping) else c for c in problem.answer["tests"]]
        return check_stdio(
            strip_code_fence(answer),
            cases,
            limits,
            rel_tol=tol,
            abs_tol=tol,
            fail_fast=fail_fast and not measuring,
            total_wall_s=MEASURE_TOTAL_S
            if measuring
            else self.budget_s(len(problem.answer["tests"]), limits),
            pool=self._pool,
        )

    def budget_s(self, cases: int, limits: Limits) -> float:
        """The whole answer's wall budget: ``total_wall_s``, raised so that a program within every
        case's (scaled) limit is never cut off by it (``workers`` cases run at a time)."""
        return max(self.total_wall_s, math.ceil(cases / self.workers) * limits.wall_s)

    def hang_guard_s(self) -> float:
        """Above a reference measurement and a check at the largest scaled limit."""
        scale = self.time_scale or TimeScale(floor_cpu_s=math.ceil(self.limits.cpu_s))
        widest = replace(self.limits, wall_s=max(scale.bound_s(), self.limits.wall_s))
        cases = max((len(p.answer["tests"]) for p in self.problems), default=1)
        return MEASURE_TOTAL_S + scale.measure.wall_s + self.budget_s(cases, widest) + widest.wall_s + 30.0

    def __getstate__(self) -> dict[str, object]:
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
