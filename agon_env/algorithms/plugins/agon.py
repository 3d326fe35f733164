"""``agon``: the paper's recipe.

Two adapters; the drafter stream is plain GRPO on bare prompts (group = N drafts of a
problem), the challenger stream is N paired rollouts each reading its own drafter
rollout's summary (group = N challenges), rewarded with the conversion bonus; the seats
swap roles every step.
"""

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm

PLUGIN = register_algorithm(
    "agon",
    AlgorithmPlugin(
        name="agon",
        summary="the paper: two adapters, draft + challenge, conversion bonus, roles swap every step",
        env_mode="challenge",
        reward_scheme="conversion",
    ),
)
