"""``fixed-roles``: agon without rotation -- agent_a always drafts, agent_b always challenges.

The ablation for the paper's claim that rotation is what pulls near-identical rivals apart.
"""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "fixed-roles",
    AlgorithmPlugin(
        name="fixed-roles",
        summary="agon without rotation: agent_a always drafts, agent_b always challenges",
        env_mode="challenge",
        reward_scheme="conversion",
        role_schedule="fixed",
    ),
)
