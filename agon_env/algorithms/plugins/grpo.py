"""``grpo``: the single-model baseline. One adapter drafts alone (solo mode), rewarded 2c + λφ."""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "grpo",
    AlgorithmPlugin(
        name="grpo",
        summary="baseline: one adapter, solo mode, plain GRPO",
        env_mode="solo",
        adapters=("agent_a",),
        role_schedule="fixed",
        trained_roles=("drafter",),
    ),
)
