"""The agents layer's user errors: a model or prompt family that cannot be had.

Every one is a :class:`~agon_env.errors.UserError` that keeps its builtin base; the one errors
module of its layer (``tests/test_architecture.py``).
"""

from __future__ import annotations

from agon_env.errors import UserError


class PromptFamilyError(UserError, ValueError):
    """A prompt family that is not registered (``--prompts.family``, or a task's ``prompt_family``)."""


class ModelSourceError(UserError, ValueError):
    """An unknown alias, a missing folder, or a hub id that cannot be fetched."""
