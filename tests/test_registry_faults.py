"""The registry's smaller faults, each one line: a missing entry-point module, a module:id whose
module registers no such id, a keyword of the wrong type, ``python -m agon_env``."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agon_env
from agon_env import registry


@pytest.fixture
def broken_id():
    name = "test/missing-module-v0"
    agon_env.register(name, entry_point="agon_no_such_package.tasks:Task", description="test only")
    yield name
    registry._REGISTRY.pop(name, None)


def test_an_entry_point_whose_module_is_missing_is_one_line_and_listed_as_such(broken_id, capsys) -> None:
    from agon_env.commands.envs import envs_main

    with pytest.raises(registry.EntryPointError) as refused:
        agon_env.make(broken_id)
    said = str(refused.value)
    assert said.startswith(f"env id {broken_id!r}: its entry point 'agon_no_such_package.tasks:Task' cannot")
    assert "No module named 'agon_no_such_package'" in said and "\n" not in said
    assert envs_main([]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if broken_id in line]
    assert "no: module" in row and " yes " not in row


def test_a_module_id_whose_module_registers_no_such_id_says_so() -> None:
    with pytest.raises(KeyError) as refused:
        agon_env.make("json:me/nothing-v0")
    assert "'json' was imported, but registers no 'me/nothing-v0' (it registers no env id)" in str(
        refused.value
    )


@pytest.mark.parametrize(
    ("kwargs", "said"), [({"seed": "a"}, "seed='a' must be int"), ({"size": 2.5}, "size=2.5")]
)
def test_a_keyword_of_the_wrong_type_is_refused(kwargs, said) -> None:
    with pytest.raises(registry.UnknownKeywordError, match=said):
        agon_env.make("agon/arith-v0", **kwargs)
    agon_env.make("agon/arith-v0", seed=3, difficulty=2.5, split="test")  # the right types still pass


def test_python_m_agon_env_is_the_agon_command() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "agon_env", "--help"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.startswith("usage: agon COMMAND"), r.stderr[-2000:]
