"""agon-env: two LLMs as each other's graders, as a PettingZoo environment.

``agon_env.make("agon/arith-v0")`` builds the two-player draft-and-challenge env;
``agon_env.register`` adds your own tasks; ``agon_env.solo`` is the single-agent
Gymnasium view of any id. Agents live in :mod:`agon_env.agents`,
training algorithms in :mod:`agon_env.algorithms`; ``agon_env.Cascade.from_run(RUN)`` is a
trained pair as a callable cascade (:mod:`agon_env.serving`, imported on first use).
"""

from typing import Any

from agon_env import envs as envs
from agon_env.envs import registrations as _registrations  # noqa: F401  (registers the built-in ids)
from agon_env.envs.solo import SoloEnv, solo
from agon_env.registry import EnvSpec, all_specs, make, register, registered_ids, spec

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "Cascade":  # imported on first use: it brings torch and the agents
        from agon_env.serving.cascade import Cascade

        return Cascade
    raise AttributeError(f"module 'agon_env' has no attribute {name!r}")


__all__ = [
    "Cascade",
    "EnvSpec",
    "SoloEnv",
    "__version__",
    "all_specs",
    "make",
    "register",
    "registered_ids",
    "solo",
    "spec",
]
