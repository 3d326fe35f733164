"""Training's user errors: a run that cannot be built, or settings that cannot train.

Every one is a :class:`~agon_env.errors.UserError` that keeps its builtin base; the one errors
module of its layer (``tests/test_architecture.py``).
"""

from __future__ import annotations

from agon_env.errors import UserError


class TaskScoreError(UserError, RuntimeError):
    """The task's ``score`` judged too few answers to learn from: the task is broken, not the policy."""


class OnPolicyError(UserError, RuntimeError):
    """The sampler served another policy than the trainer holds (stale or failed adapter load)."""


class BlowUp(UserError, RuntimeError):
    """An adapter's updates blew up again and again: the settings cannot train."""


class NonFiniteWeights(UserError, RuntimeError):
    """An adapter's weights went non-finite again and again: the settings cannot train."""


class SetupError(UserError, ValueError):
    """The run cannot be built as configured (model, env id, task keywords, data path); one line."""


class TrackerError(UserError, RuntimeError):
    """A tracker named in ``report_to`` could not start its run (e.g. wandb online without a login)."""
