"""``coop``: the agon flow with a cooperative challenger reward 2c(b) + λφ(b) (no conversion bonus)."""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "coop",
    AlgorithmPlugin(
        name="coop",
        summary="agon flow, cooperative reward: challenger gets 2c(b) + λφ(b)",
        env_mode="challenge",
        reward_scheme="coop",
    ),
)
