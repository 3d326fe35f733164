"""Serving's user errors: a run, question, file or server setting that cannot be served as asked.

Every one is a :class:`~agon_env.errors.UserError` that keeps its builtin base; the one errors
module of its layer (``tests/test_architecture.py``).
"""

from __future__ import annotations

from agon_env.errors import UserError


class ServeError(UserError, ValueError):
    """A serve command refused before any model is loaded (an open host without a key, a bad limit)."""


class AnswerFileError(UserError, ValueError):
    """An input file that is not JSON lines of questions, or an output that cannot be resumed."""


class ExportError(UserError, ValueError):
    """A run that cannot be exported as asked (no adapter folders, an output in the way)."""


class CascadeError(UserError, ValueError):
    """A run that cannot be served as asked: no direction, an unknown adapter, a cache channel."""


class QuestionError(UserError, ValueError):
    """A question the cascade cannot take (empty, or too long for the env or the model's window)."""
