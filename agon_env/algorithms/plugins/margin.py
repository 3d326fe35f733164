"""``margin``: the agon flow with a zero-sum-ish challenger reward 3c(b) − c(a) + λφ(b)."""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "margin",
    AlgorithmPlugin(
        name="margin",
        summary="agon flow, margin reward: challenger gets 3c(b) − c(a) + λφ(b)",
        env_mode="challenge",
        reward_scheme="margin",
    ),
)
