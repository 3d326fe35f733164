"""The study's user errors: a results file that ``agon study`` did not write or that does not verify.

Every one is a :class:`~agon_env.errors.UserError` that keeps its builtin base; the one errors
module of its layer (``tests/test_architecture.py``).
"""

from __future__ import annotations

from agon_env.errors import UserError


class VerifyError(UserError, ValueError):
    """A results file whose numbers do not follow from its outcome lists."""


class ResultsFileError(UserError, ValueError):
    """A file given as a study's results that ``agon study`` did not write."""
