"""One check of the env's keywords for every way in, and the API's faults as one clear line."""

from __future__ import annotations

import math

import pytest

import agon_env
from agon_env.algorithms.validation import load_config
from agon_env.config import ConfigError
from agon_env.envs.draft_challenge import EnvOptions
from agon_env.errors import UserError


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"lam": math.nan}, "lam = nan: the format weight must be a finite number ≥ 0"),
        ({"lam": math.inf}, "lam = inf: the format weight must be a finite number ≥ 0"),
        ({"lam": "0.5"}, "lam = '0.5': must be float, not str"),
        ({"lam": -0.5}, "lam = -0.5: the format weight must be a finite number ≥ 0"),
        ({"gamma": -1.0}, "gamma = -1.0: the length tiebreak must be a finite number ≥ 0, or None"),
        ({"gamma": math.nan}, "gamma = nan"),
        ({"tiebreak_drafter": "yes"}, "tiebreak_drafter = 'yes': must be bool, not str"),
        ({"max_text_length": 0}, "max_text_length = 0: must be 1 or more"),
        ({"exchange": "telepathy"}, "exchange = 'telepathy': unknown exchange"),
    ],
)
def test_make_refuses_a_keyword_of_the_wrong_type_or_out_of_range(keywords, said) -> None:
    with pytest.raises(ValueError, match=r"^env keyword ") as exc:
        agon_env.make("agon/arith-v0", **keywords)
    assert said in str(exc.value) and isinstance(exc.value, UserError)


def test_spawn_and_options_are_checked_alike() -> None:
    from agon_env.envs.draft_challenge import EnvOptionError, option_problems

    env = agon_env.make("agon/arith-v0", lam=0, gamma=0.1)  # an int weight is a number
    assert env.unwrapped.spawn().lam == 0
    env.unwrapped.lam = math.nan  # set behind the env's back: its next spawn refuses it
    with pytest.raises(EnvOptionError, match="lam = nan"):
        env.unwrapped.spawn()
    assert option_problems(EnvOptions()) == []


def test_a_training_config_gets_the_envs_own_check() -> None:
    # The config file / flag path: the same words, under the config key.
    for key, value in (("env.lam", math.nan), ("env.gamma", -1.0), ("env.lam", -1.0)):
        with pytest.raises(ConfigError, match=rf"{key} = {value!r}: "):
            load_config(overrides={key: value})


def test_a_mistyped_task_keyword_gets_a_suggestion() -> None:
    with pytest.raises(
        TypeError, match=r"unknown keyword 'dificulty' \(did you mean 'difficulty'\?\)"
    ) as exc:
        agon_env.make("agon/arith-v0", dificulty=3)
    assert isinstance(exc.value, UserError) and "env keywords: exchange, gamma, lam" in str(exc.value)
    with pytest.raises(TypeError, match=r"'lamda' \(did you mean 'lam'\?\)"):
        agon_env.make("agon/arith-v0", lamda=0.5)


def test_max_cycles_says_the_episode_is_fixed() -> None:
    from pettingzoo.test import max_cycles_test

    class Module:  # what max_cycles_test reads: env() and parallel_env() factories
        env = staticmethod(lambda **kw: agon_env.make("agon/arith-v0", **kw))
        parallel_env = env

    with pytest.raises(TypeError, match=r"fixed two-turn episode .* takes no max_cycles"):
        max_cycles_test(Module)


def test_make_none_reset_options_and_last_after_the_episode_say_what_to_do() -> None:
    with pytest.raises(TypeError, match="an env id is a string such as 'agon/arith-v0', got None"):
        agon_env.make(None)  # type: ignore[arg-type]
    env = agon_env.make("agon/arith-v0")
    with pytest.raises(TypeError, match=r"reset\(options=...\) takes a dict .* not str 'x'"):
        env.reset(options="x")  # type: ignore[arg-type]
    env.reset(seed=0)
    for _agent in env.agent_iter():
        _obs, _reward, term, trunc, _info = env.last()
        env.step(None if term or trunc else "no answer")
    with pytest.raises(RuntimeError, match=r"the episode is over .* call reset\(\) to play another"):
        env.last()
