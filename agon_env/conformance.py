"""Conformance checks for registered envs: PettingZoo's ``api_test`` and ``seed_test``
plus the draft-and-challenge contract.

Call :func:`check_env` on your own registered id (or a zero-argument constructor) from a
test::

    from agon_env.conformance import check_env

    def test_my_task():
        check_env("me/primes-v0")

It raises ``AssertionError`` (PettingZoo's, or one of ours with a message saying what
broke) and returns a small report otherwise.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pettingzoo.test import api_test, seed_test

from agon_env.envs.exchange import CHANNELS
from agon_env.envs.scoring import score_answer, score_limit
from agon_env.registry import make
from agon_env.vocabulary import AGENT_B, is_handle

if TYPE_CHECKING:
    from pettingzoo import AECEnv

EnvFactory = Callable[[], "AECEnv"]


@dataclass(frozen=True)
class ConformanceReport:
    env: str
    problems_checked: int
    api_cycles: int
    seed_cycles: int


def _factory(env: str | EnvFactory, **kwargs: Any) -> tuple[str, EnvFactory]:
    if isinstance(env, str):
        return env, lambda: make(env, **kwargs)
    return getattr(env, "__name__", "env"), env


def check_problems_fit(env: AECEnv, limit: int = 200) -> int:
    """Every one of the first ``limit`` problems yields observations inside the space."""
    n = min(limit, len(env.task))
    for i in range(n):
        for drafter in env.possible_agents:
            env.reset(seed=i, options={"problem_index": i, "drafter": drafter})
            for agent in env.agents:
                obs = env.observe(agent)
                assert env.observation_space(agent).contains(obs), (
                    f"problem {i} ({env.task[i].id}) gives an observation outside the space for {agent}"
                )
    return n


def check_episode_contract(env: AECEnv) -> None:
    """The drafter acts first; the challenger never sees the drafter's answer block, and sees
    its reasoning and its summary exactly where the channel table says (``Channel.reasoning``,
    ``Channel.summary``: no draft text at all in ``none`` and ``latent``; there ``draft`` names
    the draft)."""
    channel = getattr(getattr(env, "unwrapped", env), "channel", CHANNELS["summary"])
    env.reset(seed=0, options={"drafter": AGENT_B})
    assert env.agent_selection == AGENT_B, "the drafter named in reset options must act first"
    secret_reasoning, secret_answer = "SECRET-REASONING-7731", "SECRET-ANSWER-9944"
    draft = f"{secret_reasoning} <summary>plan SUMMARY-OK</summary><answer>{secret_answer}</answer>"
    env.step(draft)
    if env.agents and not all(env.terminations.values()):
        obs = env.observe(env.agent_selection)
        text = " ".join(str(v) for v in obs.values())
        assert secret_answer not in text, "the challenger's observation leaks the drafter's answer block"
        if not channel.reasoning:
            assert secret_reasoning not in text, "the challenger's observation leaks the drafter's reasoning"
        elif obs["draft"]:
            assert secret_reasoning in obs["draft"], f"the {channel.name} channel lacks the draft's reasoning"
        if channel.cache:
            assert is_handle(obs["draft"]), "a latent observation must name its draft with a handle"
        if channel.summary:
            assert "SUMMARY-OK" in obs["draft"], f"the {channel.name} channel lacks the drafter's summary"
        else:
            assert "SUMMARY-OK" not in text, f"the {channel.name} channel's observation carries draft text"


SAMPLE_ANSWERS = ("42", "", "-1.5", "\\frac{1}{2}", "x^2 + 1", "def f(x):\n    return x", "日本 🙂 <answer>")
"""Answers every task's ``score`` must judge without raising (the env would score them 0)."""


def check_scores(env: AECEnv, limit: int = 5) -> None:
    """``task.score`` returns a bool on sample answers for the first problems, in time, never raises.

    The env catches a raising ``score`` (a run must survive odd model text) and abandons one
    that overruns its wall-clock limit (:mod:`agon_env.envs.scoring`), so this is where a
    broken scorer fails loudly, with its traceback. A hanging one stops the check at its first
    overrun: each costs the whole limit.
    """
    task = env.task
    name = getattr(task, "name", type(task).__name__)
    for i in range(min(limit, len(task))):
        problem = task[i]
        for answer in SAMPLE_ANSWERS:
            verdict = score_answer(task, problem, answer)
            if verdict.hung:
                raise AssertionError(
                    f"{name}.score gave no verdict within {score_limit(task):g} s (its score_timeout) on "
                    f"problem {problem.id} with answer {answer!r}: 1 score_timeout; score must return in "
                    "bounded time (the env abandons the call; its thread runs on)"
                )
            if verdict.timeout:
                raise AssertionError(
                    f"{name}.score raised VerifierTimeout on problem {problem.id} with answer {answer!r}"
                )
            if verdict.error is not None:  # a traceback, or what it returned instead of a bool
                raise AssertionError(
                    f"{name}.score failed on problem {problem.id} with answer {answer!r}:\n{verdict.error}"
                )


def check_env(
    env: str | EnvFactory,
    num_cycles: int = 50,
    seed_cycles: int = 50,
    max_problems: int = 200,
    **kwargs: Any,
) -> ConformanceReport:
    """Run PettingZoo's ``api_test`` and ``seed_test`` and the contract checks on ``env``.

    The scorer is probed first, one call at a time: a ``score`` that hangs stops the check at its
    first call, one limit (PettingZoo's tests would each wait it out again)."""
    name, factory = _factory(env, **kwargs)
    check_scores(factory())
    with warnings.catch_warnings():
        # api_test passes reset(options={"options": ...}) on purpose; the env's warning about the
        # unknown key would read as the user's fault.
        warnings.filterwarnings("ignore", message=".*ignoring unknown reset options")
        api_test(factory(), num_cycles=num_cycles)
        seed_test(factory, num_cycles=seed_cycles)
    checked = check_problems_fit(factory(), limit=max_problems)
    check_episode_contract(factory())
    return ConformanceReport(name, checked, num_cycles, seed_cycles)
