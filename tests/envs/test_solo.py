"""The single-agent Gymnasium view: Gymnasium's own checker, rewards, and refusals."""

from __future__ import annotations

import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import agon_env
from agon_env.envs.solo import GYMNASIUM_ID

RIGHT = "<summary>Worked it out.</summary><answer>{}</answer>"


def _gold(env: agon_env.SoloEnv) -> str:
    return str(env.aec.unwrapped.problem.answer)


def test_drafting_view_passes_gymnasium_check_env() -> None:
    check_env(agon_env.solo("agon/arith-v0"))


def test_challenging_view_passes_gymnasium_check_env() -> None:
    check_env(agon_env.solo("agon/arith-v0", opponent=lambda obs: "<answer>0</answer>"))


def test_gymnasium_make_finds_it_and_checks_render_modes() -> None:
    env = gymnasium.make(GYMNASIUM_ID, env_id="agon/arith-v0", render_mode="ansi")
    assert env.spec is not None and env.spec.id == GYMNASIUM_ID
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_env(env.unwrapped)  # with a spec, so the checker also rebuilds it in each render mode
    assert not [w for w in seen if "spec" in str(w.message)]


def test_drafting_reward_is_the_drafters_and_the_episode_is_one_step() -> None:
    env = agon_env.solo("agon/arith-v0")
    obs, info = env.reset(seed=0)
    assert obs["role"] == 0 and obs["draft"] == "" and obs["text"] == obs["problem"]
    _, reward, terminated, truncated, info = env.step(RIGHT.format(_gold(env)))
    assert (reward, terminated, truncated) == (2.5, True, False)  # 2c + λφ, λ = 0.5
    assert info["correct"] and info["role"] == "drafter"
    with pytest.raises(RuntimeError, match="reset"):
        env.step("again")


def test_challenging_earns_the_conversion_bonus_against_a_wrong_fixed_drafter() -> None:
    env = agon_env.solo(
        "agon/arith-v0", opponent=lambda obs: "<summary>Guessed.</summary><answer>-999</answer>"
    )
    obs, _ = env.reset(seed=1)
    assert obs["role"] == 1 and obs["draft"] == "Guessed."
    _, reward, terminated, _, info = env.step(RIGHT.format(_gold(env)))
    assert reward == 3.5 and terminated  # 2c(b) + c(b)(1 − c(a)) + λφ = 2 + 1 + 0.5
    assert info["role"] == "challenger"


def test_same_seed_same_problem() -> None:
    env = agon_env.solo("agon/arith-v0")
    assert env.reset(seed=7)[0] == env.reset(seed=7)[0]


def test_refuses_views_that_are_not_one_turn() -> None:
    with pytest.raises(ValueError, match="mode='solo'"):
        agon_env.SoloEnv(agon_env.make("agon/arith-v0"))
    with pytest.raises(ValueError, match="one seat"):
        agon_env.solo("agon/arith-v0", opponent=lambda obs: "", mode="self")
