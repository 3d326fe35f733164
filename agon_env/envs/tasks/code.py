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

``Problem.answer`` holds the test bundle (and the reference solution, for the project's own
tests); it never reaches an observation. ``score`` is bounded in time and raises only when the
sandbox itself fails (:class:`~agon_env.envs.tasks.errors.VerifierError`; model code that is slow
or crashes is a wrong answer): one sandbox run of at most ``limits.wall_s`` for assert tasks; for
CodeContests each case is bounded by ``limits.wall_s`` and the whole answer by ``total_wall_s``
plus one case.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.envs.tasks.code_checks import CheckReport
from agon_env.envs.tasks.errors import VerifierError
from agon_env.sandbox import Limits

_T = TypeVar("_T")

# Wall limits sit well above the CPU limits: on a shared 2-core machine a 3 s CPU run can take 8 s
# of wall time, and a spurious timeout is a wrong reward.
ASSERT_LIMITS = Limits(cpu_s=5, wall_s=15.0)


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


def take(items: Iterable[_T], limit: int | None) -> list[_T]:
    """The first ``limit`` items (all of them when ``limit`` is ``None``), as a list."""
    kept = list(items)
    return kept if limit is None else kept[:limit]
