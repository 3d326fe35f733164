"""Tasks: indexable problem sets with a ``score`` (see :mod:`agon_env.envs.tasks.base`)."""
