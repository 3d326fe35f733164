"""Code tasks, scored by running tests in the sandbox: what HumanEval, MBPP and CodeContests share.

The text inside ``<answer>`` is the program (a surrounding ```/```python fence is stripped, see
:func:`~agon_env.envs.tasks.code_checks.strip_code_fence`). Correctness is "every test passes".
Each dataset has a module of its own with a loader (``load_*_problems``: rows to :class:`Problem`,
with the prompt and the test bundle), a task class that only scores, and a factory registered as
its env id. Each prompt says which form the answer takes:

* :class:`~agon_env.envs.tasks.humaneval.HumanEvalTask` -- the function definition; it runs after
  the HumanEval prompt (so the prompt's imports and helpers exist), then ``test`` and
  ``check(entry_point)``.
* :class:`~agon_env.envs.tasks.mbpp.MBPPTask` -- a Python program defining the function. The
  prompt shows the task text and the *first* assert as a signature hint (standard MBPP practice:
  without it the expected name and argument order are guesswork); all asserts of ``test_list``
  are scored, the first included. ``challenge_test_list`` is not used.
* :class:`~agon_env.envs.tasks.codecontests.CodeContestsTask` -- a full program reading stdin and
  writing stdout, run on each ``{input, output}`` test. Problems whose statement grants an
  "absolute or relative error" are compared with that float tolerance.

Splits (``split=`` train / validation / test, ``None``: every row; docs/envs.md) share no normalised
prompt: MBPP's are the upstream task-id ranges, less validation and train rows restating an earlier
split's task text; CodeContests' are the hub's, and a local file (which records none) is carved by
:func:`~agon_env.envs.tasks.base.content_split`; HumanEval is test only.

``Problem.answer`` holds the test bundle (and the reference solution); it never reaches an
observation. ``score`` is bounded in time and raises only when the sandbox itself fails
(:class:`~agon_env.envs.tasks.errors.VerifierError`) or the program ran out of time
(:class:`~agon_env.envs.tasks.errors.VerifierTimeout`): one sandbox run of at most
``limits.wall_s`` for assert tasks; for CodeContests each case is bounded by ``limits.wall_s`` and
the whole answer by ``total_wall_s`` plus one case.

**Time limits scaled to the machine** (:class:`TimeScale`, CodeContests-style). A fixed limit makes
the verdict the machine's: the CodeContests reference ``1238_e`` needs ~9 CPU s on one case here,
so at a fixed 10 s it passed on a fast CI machine and timed out on this one. So a problem with a
reference solution gets ``max(floor, multiple × the reference's CPU time on this machine)`` CPU
seconds per run (and a wall limit in proportion). The reference is measured once per problem and
process, the first time the problem is scored, under a generous cap (:attr:`TimeScale.measure`),
and cached by the problem's content (:func:`reference_cpu_s`). A problem without a reference, or
whose reference does not finish under the cap, keeps the task's fixed ``limits``. Checking the
reference itself reuses that measurement (:func:`reference_check`): it already ran every case,
under limits wider than the scaled ones, and a second run would tell nothing new (scoring a
dataset's references, as its conformance tests do, costs one run per problem, not two).

**A time-out is counted, not called wrong.** A program that fails no case but runs over its limit
(:attr:`~agon_env.envs.tasks.code_checks.CheckReport.over_time`) still scores 0, but ``score``
raises :class:`~agon_env.envs.tasks.errors.VerifierTimeout`, so the env records it as a
``score_timeout`` (episode info, run metrics, ``agon eval``, the held-out check), never silently
as a wrong answer. A program that fails or crashes on some case is wrong, whatever else it did.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.envs.tasks.code_checks import CheckReport
from agon_env.envs.tasks.errors import VerifierError, VerifierTimeout
from agon_env.sandbox import Limits

_T = TypeVar("_T")

# Wall limits sit well above the CPU limits: on a shared 2-core machine a 3 s CPU run can take 8 s
# of wall time, and a spurious timeout is a wrong reward.
ASSERT_LIMITS = Limits(cpu_s=5, wall_s=15.0)


MEASURE_LIMITS = Limits(cpu_s=30, wall_s=90.0)


@dataclass(frozen=True)
class TimeScale:
    """Per-problem limits from a reference solution's measured CPU time (CodeContests-style)."""

    multiple: float = 3.0
    """The limit is this many times the reference's CPU time on its slowest run."""
    floor_cpu_s: int = 2
    """The least CPU limit: start-up and a one-line function must never time out."""
    wall_per_cpu: float = 2.0
    """Wall seconds per CPU second allowed (a shared machine runs slower than its CPU time)."""
    wall_slack_s: float = 5.0
    """Added to the wall limit: sandbox start-up, a loaded machine."""
    measure: Limits = MEASURE_LIMITS
    """The cap a reference is measured under; one that does not finish keeps the fixed limits."""

    def limits(self, base: Limits, reference_cpu_s: float) -> Limits:
        """``base`` with the CPU and wall limits for a reference that took ``reference_cpu_s``."""
        cpu = max(self.floor_cpu_s, math.ceil(self.multiple * reference_cpu_s))  # RLIMIT_CPU: whole s
        return replace(base, cpu_s=cpu, wall_s=self.wall_per_cpu * cpu + self.wall_slack_s)

    def bound_s(self, runs: int = 1) -> float:
        """The longest ``runs`` sandbox runs at any scaled limit can take (wall seconds)."""
        cpu = max(self.floor_cpu_s, math.ceil(self.multiple * self.measure.cpu_s))
        return runs * (self.wall_per_cpu * cpu + self.wall_slack_s)


TIME_SCALE = TimeScale()
"""The code tasks' default scaling."""

_MEASURED: dict[str, CheckReport | None] = {}
_MEASURED_LOCK = threading.Lock()


def _reference(problem: Problem) -> str | None:
    reference = problem.answer.get("reference") if isinstance(problem.answer, dict) else None
    return reference or None


def _measurement(task: CodeTask, problem: Problem) -> CheckReport | None:
    """The report of ``problem``'s reference run on every case under the measuring cap, once per
    process and problem content; None: no reference, no scaling, or it did not finish every run."""
    reference = _reference(problem)
    if task.time_scale is None or reference is None:
        return None
    key = hashlib.sha256(f"{type(task).__qualname__}\0{problem.answer!r}".encode()).hexdigest()
    with _MEASURED_LOCK:
        if key in _MEASURED:
            return _MEASURED[key]
    report = task.run_checks(problem, reference, task.time_scale.measure, measuring=True)
    ran = all(c.status not in ("timed_out", "skipped") for c in report.cases)
    with _MEASURED_LOCK:
        _MEASURED[key] = report if ran else None
    return _MEASURED[key]


def reference_cpu_s(task: CodeTask, problem: Problem) -> float | None:
    """The CPU seconds of the slowest run of ``problem``'s reference on this machine, measured
    once per process and problem content (None: no reference, or it did not finish every run
    under the cap). The reference's verdict does not matter, only its time: a reference whose
    output a test disputes still says how long the problem's work takes."""
    report = _measurement(task, problem)
    return None if report is None else report.cpu_s


def reference_check(task: CodeTask, problem: Problem, answer: str) -> CheckReport | None:
    """The measurement's report when ``answer`` is ``problem``'s reference, else None. It is that
    answer's check: the same program on every case, compared the same way, under a cap wider than
    its scaled limit (``multiple`` times its slowest case), so nothing in it ran over time."""
    if answer != _reference(problem):
        return None
    return _measurement(task, problem)


class CodeTask(ListTask):
    """Shared scoring for code tasks: ``score`` is ``check(...).all_passed``.

    Whatever the program does (crash, flood stdout) is a verdict; running over its time limit
    with no case wrong is a time-out (:class:`VerifierTimeout`, counted in ``score_timeouts``).
    A check that cannot run it (no sandbox Python, bwrap failing, a dead pool) raises
    :class:`VerifierError`, which the env scores 0 and counts in ``score_errors`` -- never a
    silent wrong answer.
    """

    name = "code"
    default_limits: Limits = ASSERT_LIMITS

    def __init__(
        self,
        problems: Sequence[Problem],
        limits: Limits | None = None,
        time_scale: TimeScale | None = TIME_SCALE,
    ) -> None:
        super().__init__(problems)
        self.limits = limits or self.default_limits
        self.time_scale = time_scale
        self.score_timeout: float | None = self.hang_guard_s()
        """The env's hang guard (:mod:`agon_env.envs.scoring`), settable like any task's."""

    def hang_guard_s(self) -> float:
        """Above a reference measurement and a check at the largest scaled limit, so the
        sandbox's own limits always report first."""
        scale = self.time_scale or TimeScale(floor_cpu_s=math.ceil(self.limits.cpu_s))
        return scale.measure.wall_s + max(scale.bound_s(), self.limits.wall_s) + 30.0

    def limits_for(self, problem: Problem) -> Limits:
        """The limits ``problem``'s answers run under: scaled to its reference's measured time
        (:class:`TimeScale`), else the task's fixed ``limits``."""
        measured = reference_cpu_s(self, problem)
        if self.time_scale is None or measured is None:
            return self.limits
        return self.time_scale.limits(self.limits, measured)

    def run_checks(
        self, problem: Problem, answer: str, limits: Limits, measuring: bool = False
    ) -> CheckReport:  # pragma: no cover - abstract
        """Run ``answer``'s tests under ``limits`` (``measuring``: every case, for its time)."""
        raise NotImplementedError

    def check(self, problem: Problem, answer: str) -> CheckReport:
        measured = reference_check(self, problem, answer)
        if measured is not None:
            return measured
        return self.run_checks(problem, answer, self.limits_for(problem))

    def score(self, problem: Problem, answer: str) -> bool:
        try:
            report = self.check(problem, answer)
        except VerifierError:
            raise
        except Exception as e:
            raise VerifierError(f"code check of {problem.id} could not run: {e!r}") from e
        if report.over_time:
            limits = self.limits_for(problem)
            raise VerifierTimeout(
                f"{problem.id}: the program ran over its time limit ({limits.cpu_s:g} CPU s, "
                f"{limits.wall_s:g} s wall) with no case wrong ({report.summary()})"
            )
        return report.all_passed


def take(items: Iterable[_T], limit: int | None) -> list[_T]:
    """The first ``limit`` items (all of them when ``limit`` is ``None``), as a list."""
    kept = list(items)
    return kept if limit is None else kept[:limit]
