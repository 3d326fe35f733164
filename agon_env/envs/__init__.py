"""Environments: the draft-and-challenge AEC env, its tasks, parser and reward schemes.

Nothing here imports a model: envs take text in and emit text, rewards and infos.
"""

from agon_env.envs.draft_challenge import MODES, DraftChallengeEnv, EnvOptions
from agon_env.envs.format import Parsed, parse_completion
from agon_env.envs.rewards import Outcome, episode_rewards, register_scheme, scheme_names
from agon_env.envs.tasks.base import ListTask, Problem, Task

__all__ = [
    "MODES",
    "DraftChallengeEnv",
    "EnvOptions",
    "ListTask",
    "Outcome",
    "Parsed",
    "Problem",
    "Task",
    "episode_rewards",
    "parse_completion",
    "register_scheme",
    "scheme_names",
]
