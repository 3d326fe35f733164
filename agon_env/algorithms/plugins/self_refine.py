"""``self-refine``: one adapter drafts, then reads its own draft's summary and answers again.

Both streams (draft and refinement) update the same adapter; the refinement is rewarded
with the conversion bonus against its own draft, so fixing one's own mistake pays.
"""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "self-refine",
    AlgorithmPlugin(
        name="self-refine",
        summary="one adapter reads its own earlier draft (self mode); both streams train it",
        env_mode="self",
        reward_scheme="conversion",
        adapters=("agent_a",),
        role_schedule="fixed",
    ),
)
