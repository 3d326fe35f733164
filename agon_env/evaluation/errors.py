"""Evaluation's user errors: a run, report or split that cannot be evaluated as asked.

Every one is a :class:`~agon_env.errors.UserError` that keeps its builtin base; the one errors
module of its layer (``tests/test_architecture.py``).
"""

from __future__ import annotations

from agon_env.errors import UserError


class NoHeldout(UserError, ValueError):
    """The run's env has no held-out problems to check on (not a task, or test ∩ training ≠ ∅)."""


class NoMetricsError(UserError, FileNotFoundError):
    """A folder given as a run has no training metrics."""


class EvalReportError(UserError, ValueError):
    """A file given as an eval report that ``agon eval`` did not write."""


class SelectionLeakError(UserError, ValueError):
    """Validation and test overlap, so a choice made on validation would see test problems."""


class OverlapError(UserError, ValueError):
    """The test problems overlap the validation problems or the training pool."""
