"""Test formats for code answers, run through :mod:`agon_env.sandbox`.

Two formats:

* **stdin/stdout cases** (CodeContests): the program runs once per case with the case input on
  stdin, in its own sandbox; its stdout is compared on the host with the expected output as
  whitespace-separated tokens (like Codeforces' ``wcmp`` checker), optionally with a float
  tolerance. The program never sees expected outputs.
* **assert cases** (MBPP, HumanEval): one sandbox run of a two-process harness. A trusted judge
  process runs the setup code and every test snippet itself; the program lives in a second
  process, forked before the judge reads the tests, that only answers calls to its functions
  with plain data (see ``assert_judge.py``). An ``AssertionError`` is a *failed* case, any other
  exception a *crashed* one. What this defends: exiting early or crashing (the case is not
  passed), forging reports or patching the test machinery (the judge's memory, stdout and
  file descriptors are out of the program's reach), objects that rig comparisons (only exact
  builtin types cross the pipe), and reading the tests or expected values (they are never in
  the program's process). What it does not: a program that detects it is being tested in
  some other way and still computes the right values -- which is solving the task.

Results are a :class:`CheckReport` of per-case :class:`CaseResult` (passed / failed / timed_out /
crashed / skipped) with a short detail such as a stderr tail, and the CPU time of the slowest run
(what :class:`~agon_env.envs.tasks.code.TimeScale` scales limits by). A report that failed for want
of time alone is :attr:`CheckReport.over_time`: the tasks count it as a time-out, not a wrong
answer. Comparison and parsing helpers are pure.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agon_env.envs.tasks.errors import VerifierError
from agon_env.sandbox import Limits, RunResult, SandboxPool, run_python

CaseStatus = Literal["passed", "failed", "timed_out", "crashed", "skipped"]
_DETAIL = 400


@dataclass(frozen=True)
class IOCase:
    """One stdin/stdout test."""

    input: str
    output: str


@dataclass(frozen=True)
class CaseResult:
    status: CaseStatus
    detail: str = ""


_BUDGET_SPENT = "not run: total time budget spent"


@dataclass(frozen=True)
class CheckReport:
    cases: tuple[CaseResult, ...]
    cpu_s: float | None = None
    """The CPU seconds of the slowest sandbox run (the unit a time limit bounds: one stdin/stdout
    case, or the whole assert harness); None when a run has none (killed at a limit)."""

    @property
    def all_passed(self) -> bool:
        return len(self.cases) > 0 and all(c.status == "passed" for c in self.cases)

    @property
    def over_time(self) -> bool:
        """Not passed for want of time alone: no case failed or crashed, and one ran over its
        limit or was not run because the answer's time budget was spent. Such a verdict is the
        machine's as much as the program's, so tasks count it as a time-out, not a wrong answer."""
        statuses = [c.status for c in self.cases]
        if "failed" in statuses or "crashed" in statuses:
            return False
        return "timed_out" in statuses or any(c.detail == _BUDGET_SPENT for c in self.cases)

    @property
    def n_passed(self) -> int:
        return sum(c.status == "passed" for c in self.cases)

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.cases:
            counts[c.status] = counts.get(c.status, 0) + 1
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no cases"


_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL | re.IGNORECASE)


def strip_code_fence(text: str) -> str:
    """The code in an answer: the first ```/```python fenced block if there is one, else the text.

    Leading indentation is kept (a HumanEval answer may be an indented function body).
    """
    m = _FENCE.search(text)
    code = m.group(1) if m else text
    return code.strip("\n").rstrip()


def _is_close(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    except ValueError:
        return False


def outputs_match(got: str, expected: str, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Token-wise equality, ignoring all whitespace differences; numbers within tolerance if given."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    tolerant = rel_tol > 0 or abs_tol > 0
    return all(x == y or (tolerant and _is_close(x, y, rel_tol, abs_tol)) for x, y in zip(a, b, strict=True))


_TOL_PHRASE = re.compile(r"(?:absolute|relative)\s+(?:or\s+(?:absolute|relative)\s+)?error", re.IGNORECASE)
_TOL_VALUE = re.compile(r"10\s*(?:\^\s*\{?\s*|\s)-\s*(\d+)\s*\}?")


def tolerance_from_statement(statement: str) -> float | None:
    """The float tolerance a problem statement grants ("absolute or relative error ... 10^{-6}")."""
    for m in _TOL_PHRASE.finditer(statement):
        v = _TOL_VALUE.search(statement, m.end(), m.end() + 200)
        if v:
            return 10.0 ** -int(v.group(1))
    return None


def _tail(text: str) -> str:
    return text[-_DETAIL:]


# What the sandbox's own launchers print when they cannot set a run up (the program never started).
_LAUNCHERS = ("bwrap: ", "prlimit: ", "unshare: ", "setpriv: ")


def sandbox_failure(run: RunResult) -> str | None:
    """The launcher's error when the sandbox failed to start the program, else None.

    Such a run says nothing about the answer: it is the verifier's failure, not a crash. Model
    code can print a launcher's words and exit itself, so a run that looks like one is believed
    only if a trivial program fails in the same sandbox too (a canary run, only on suspicion).
    """
    if not (run.status == "error" and not run.stdout and run.stderr_tail.startswith(_LAUNCHERS)):
        return None
    canary = run_python("print('ok')", "", Limits(cpu_s=2, wall_s=15.0))
    return None if (canary.status, canary.stdout) == ("ok", "ok\n") else run.stderr_tail


def _require_started(run: RunResult) -> None:
    failure = sandbox_failure(run)
    if failure is not None:
        raise VerifierError(f"the sandbox could not start the program (exit {run.returncode}): {failure}")


def judge_io(run: RunResult, case: IOCase, rel_tol: float = 0.0, abs_tol: float = 0.0) -> CaseResult:
    """Turn one sandbox run of a stdin/stdout case into a case result.

    Raises :class:`VerifierError` when the sandbox never started the program.
    """
    _require_started(run)
    if run.status == "timeout":
        return CaseResult("timed_out", f"over the time limit after {run.wall_s:.1f} s")
    if run.status == "output_limit":
        return CaseResult("crashed", "killed: output over the cap")
    if run.status != "ok":
        return CaseResult("crashed", f"{run.status} (exit {run.returncode}): {_tail(run.stderr_tail)}")
    if outputs_match(run.stdout, case.output, rel_tol, abs_tol):
        return CaseResult("passed")
    return CaseResult("failed", f"expected {case.output[:150]!r}, got {run.stdout[:150]!r}")


def check_stdio(
    program: str,
    cases: Sequence[IOCase],
    limits: Limits | None = None,
    *,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    fail_fast: bool = True,
    total_wall_s: float | None = None,
    pool: SandboxPool | None = None,
) -> CheckReport:
    """Run ``program`` on each case. With ``fail_fast`` the cases after the first failure are skipped;
    after ``total_wall_s`` the rest are skipped (so the whole check ends within it plus one case's
    ``limits.wall_s``). A ``pool`` runs cases concurrently.
    """
    limits = limits or Limits()
    deadline = time.monotonic() + total_wall_s if total_wall_s is not None else math.inf
    get: Callable[[int], RunResult]
    futures = [pool.submit(program, c.input, limits) for c in cases] if pool is not None else []
    if futures:
        get = lambda i: futures[i].result()  # noqa: E731
    else:
        get = lambda i: run_python(program, cases[i].input, limits)  # noqa: E731
    results: list[CaseResult] = []
    cpu: list[float | None] = []
    skip_reason = ""
    for i, case in enumerate(cases):
        if skip_reason:
            if futures:
                futures[i].cancel()
            results.append(CaseResult("skipped", skip_reason))
            continue
        run = get(i)
        cpu.append(run.cpu_s)
        result = judge_io(run, case, rel_tol, abs_tol)
        results.append(result)
        if fail_fast and result.status != "passed":
            skip_reason = f"not run: case {i} {result.status}"
        elif time.monotonic() > deadline:
            skip_reason = _BUDGET_SPENT
    return CheckReport(tuple(results), _slowest(cpu))


def _slowest(cpu: Sequence[float | None]) -> float | None:
    return None if not cpu or any(c is None for c in cpu) else max(c for c in cpu if c is not None)


# The judge script that runs the assert tests in the sandbox (see its docstring).
_HARNESS = (Path(__file__).parent / "assert_judge.py").read_text(encoding="utf-8")


def parse_harness_report(run: RunResult, nonce: str, n_tests: int) -> CheckReport:
    """Per-case results from the harness's nonce-tagged lines; unreported cases take the run's fate.

    Raises :class:`VerifierError` when the sandbox never started the harness.
    """
    _require_started(run)
    status: dict[int, CaseResult] = {}
    started: int | None = None
    for line in run.stdout.splitlines():
        head, _, body = line.partition(" ")
        if head != nonce:
            continue
        try:
            parts = json.loads(body)
        except ValueError:
            continue
        if parts[0] == "setup":
            if parts[2:] == ["timed_out"]:  # loading the program ran out of CPU time
                return CheckReport((CaseResult("timed_out", str(parts[1])),) * n_tests, run.cpu_s)
            crash = CaseResult("crashed", "program or setup raised: " + _tail(str(parts[1])))
            return CheckReport((crash,) * n_tests, run.cpu_s)
        if parts[0] == "start":
            started = int(parts[1])
        elif parts[0] == "case" and parts[2] in ("passed", "failed", "crashed", "timed_out"):
            status[int(parts[1])] = CaseResult(parts[2], _tail(str(parts[3])))
    if run.status == "timeout":
        fate = CaseResult("timed_out", f"over the time limit after {run.wall_s:.1f} s")
    else:
        ended = f"the run ended without reporting ({run.status}, exit {run.returncode})"
        fate = CaseResult("crashed", f"{ended}: {_tail(run.stderr_tail)}")
    if started is None:  # died or hung before the first case: in the program or setup code
        return CheckReport((fate,) * n_tests, run.cpu_s)
    skipped = CaseResult("skipped", "not run: the run ended before this case")
    results = [status.get(i, fate if i == started else skipped) for i in range(n_tests)]
    return CheckReport(tuple(results), run.cpu_s)


def check_asserts(
    program: str, tests: Sequence[str], setup: str = "", limits: Limits | None = None
) -> CheckReport:
    """Run ``program``, then ``setup``, then each test snippet (assert statements) in one sandbox.

    ``limits.wall_s`` bounds the whole run; a hanging case is ``timed_out`` and later ones skipped.
    """
    nonce = secrets.token_hex(16)
    payload = json.dumps({"program": program, "setup": setup, "tests": list(tests), "nonce": nonce})
    run = run_python(_HARNESS, payload, limits or Limits())
    return parse_harness_report(run, nonce, len(tests))
