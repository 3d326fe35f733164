"""Training: the GRPO core, algorithm plugins, rollouts, the trainer loop and checkpoints.

Only :mod:`agon_env.algorithms.grpo` and the plugin registry are import-light; the trainer
imports torch and the agents layer lazily so ``agon envs`` stays fast.
"""

from agon_env.algorithms import plugins as _plugins  # noqa: F401  (registers the built-in algorithms)
