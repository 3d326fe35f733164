"""Built-in algorithm plugins; importing this package registers them all."""

from agon_env.algorithms.plugins import (  # noqa: F401
    agon,
    coop,
    fixed_roles,
    grpo,
    hidden_draft,
    margin,
    self_refine,
)
