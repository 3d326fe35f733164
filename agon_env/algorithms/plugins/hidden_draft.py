"""``hidden-draft``: competition without visible exchange.

The challenger sees only the problem, but each challenge rollout is rewarded against its
own paired (hidden) draft with the conversion bonus -- the per-rollout hidden-draft cell
the paper left open. Roles still swap every step.
"""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "hidden-draft",
    AlgorithmPlugin(
        name="hidden-draft",
        summary="challenger does not see the draft but is rewarded against its own paired draft",
        env_mode="hidden",
        reward_scheme="conversion",
    ),
)
