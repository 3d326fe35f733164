"""Every registered id that can be built offline passes PettingZoo's api_test and seed_test."""

import pytest

import agon_env
from agon_env.conformance import check_env, check_problems_fit
from agon_env.envs.exchange import CHANNELS
from agon_env.envs.tasks.data import local_file

NEEDS = {
    "agon/gsm8k-v0": "gsm8k_test.jsonl",
    "agon/mbpp-v0": "mbpp.jsonl",
    "agon/codecontests-v0": "codecontests_sample.jsonl",
}
OFFLINE = [s.id for s in agon_env.all_specs() if s.offline]


def _skip_without_data(env_id: str) -> None:
    need = NEEDS.get(env_id)
    if need and local_file(need) is None:
        pytest.skip(f"{need} not found under ../shared/data")


@pytest.mark.parametrize("env_id", OFFLINE)
def test_offline_env_conforms(env_id):
    _skip_without_data(env_id)
    report = check_env(env_id, num_cycles=20, seed_cycles=20, max_problems=50)
    assert report.problems_checked > 0


@pytest.mark.parametrize("mode", ["challenge", "solo", "self"])
def test_every_mode_conforms(mode):
    check_env("agon/arith-v0", mode=mode, num_cycles=20, seed_cycles=20, max_problems=20)


@pytest.mark.parametrize("exchange", list(CHANNELS))
@pytest.mark.parametrize("mode", ["challenge", "self"])
def test_every_exchange_channel_conforms(mode, exchange):
    check_env("agon/arith-v0", mode=mode, exchange=exchange, num_cycles=10, seed_cycles=10, max_problems=10)


def test_math_v0_with_in_memory_problems_conforms():
    problems = [
        {"question": "Compute $\\int_0^1 x\\,dx$ (数学).", "answer": "\\frac{1}{2}"},
        {"question": "1+1", "answer": "2"},
    ]
    check_env("agon/math-v0", problems=problems, num_cycles=10, seed_cycles=10)


@pytest.mark.parametrize("env_id", OFFLINE)
def test_real_problems_fit_the_observation_space(env_id):
    _skip_without_data(env_id)
    env = agon_env.make(env_id)
    assert check_problems_fit(env, limit=len(env.task) if len(env.task) <= 500 else 500) > 0


def test_check_env_catches_a_leaky_env():
    from agon_env.envs.draft_challenge import DraftChallengeEnv

    class Leaky(DraftChallengeEnv):
        def observe(self, agent):
            obs = super().observe(agent)
            if self.turns:
                obs["text"] += self.turns[0].parsed.answer or ""
            return obs

    with pytest.raises(AssertionError, match="leaks"):
        check_env(
            lambda: Leaky(agon_env.make("agon/arith-v0").task), num_cycles=5, seed_cycles=5, max_problems=2
        )


def test_check_env_fails_with_the_traceback_of_a_raising_scorer():
    from agon_env.envs.tasks.base import ListTask, Problem

    class Broken(ListTask):
        name = "broken"

        def score(self, problem, answer):
            return 1 / len(answer) > 0  # raises on the empty answer

    def factory():
        return agon_env.make("agon/math-v0", task=Broken([Problem("p", "What is 1 + 1?", "2")]))

    with pytest.raises(AssertionError, match=r"(?s)broken\.score failed.*answer ''.*ZeroDivisionError"):
        check_env(factory, num_cycles=2, seed_cycles=2)
