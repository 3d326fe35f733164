"""The built-in algorithm plugins: one row each, registered by :func:`register_algorithm`.

Each recipe is data (see :class:`~agon_env.algorithms.registry.AlgorithmPlugin`): the
env mode, reward scheme and exchange channel it asks for ("run's": the run's
``env.exchange``), the adapters it trains, who drafts at step
``t`` and which role streams produce updates. The trainer reads these fields and never
branches on a name.

================  =========  ==========  ========  ========  =========  ===============================
name              mode       reward      exchange  adapters  roles      trained streams
================  =========  ==========  ========  ========  =========  ===============================
``agon``          challenge  conversion  run's     a, b      alternate  drafter + challenger (the paper)
``coop``          challenge  coop        run's     a, b      alternate  drafter + challenger
``margin``        challenge  margin      run's     a, b      alternate  drafter + challenger
``fixed-roles``   challenge  conversion  run's     a, b      fixed      drafter + challenger
``hidden-draft``  challenge  conversion  ``none``  a, b      alternate  drafter + challenger
``self-refine``   self       conversion  run's     a         fixed      both turns of the one adapter
``grpo``          solo       --          --        a         fixed      drafter
================  =========  ==========  ========  ========  =========  ===============================
"""

from __future__ import annotations

from agon_env.algorithms.registry import AlgorithmPlugin, register_algorithm
from agon_env.vocabulary import AGENT_A, DRAFTER

PLUGINS = (
    AlgorithmPlugin(
        name="agon",
        summary="the paper: two adapters, draft + challenge, conversion bonus, roles swap every step",
        # The drafter stream is plain GRPO on bare prompts (group = N drafts of a problem);
        # the challenger stream is N paired rollouts, each reading its own draft's summary.
        env_mode="challenge",
        reward_scheme="conversion",
    ),
    AlgorithmPlugin(
        name="coop",
        summary="agon flow, cooperative reward: challenger gets 2c(b) + λφ(b) (no conversion bonus)",
        env_mode="challenge",
        reward_scheme="coop",
    ),
    AlgorithmPlugin(
        name="margin",
        summary="agon flow, margin reward: challenger gets 3c(b) − c(a) + λφ(b)",
        env_mode="challenge",
        reward_scheme="margin",
    ),
    AlgorithmPlugin(
        name="fixed-roles",
        summary="agon without rotation: agent_a always drafts, agent_b always challenges",
        # The ablation for the paper's claim that rotation pulls near-identical rivals apart.
        env_mode="challenge",
        reward_scheme="conversion",
        role_schedule="fixed",
    ),
    AlgorithmPlugin(
        name="hidden-draft",
        summary="challenger does not see the draft but is rewarded against its own paired draft",
        # Competition without visible exchange: the per-rollout hidden-draft cell the paper left open.
        env_mode="challenge",
        reward_scheme="conversion",
        exchange="none",
    ),
    AlgorithmPlugin(
        name="self-refine",
        summary="one adapter reads its own earlier draft (self mode); both streams train it",
        # The refinement is rewarded with the conversion bonus against its own draft.
        env_mode="self",
        reward_scheme="conversion",
        adapters=(AGENT_A,),
        role_schedule="fixed",
    ),
    AlgorithmPlugin(
        name="grpo",
        summary="baseline: one adapter, solo mode, plain GRPO",
        env_mode="solo",
        adapters=(AGENT_A,),
        role_schedule="fixed",
        trained_roles=(DRAFTER,),
    ),
)

for _plugin in PLUGINS:
    register_algorithm(_plugin)
