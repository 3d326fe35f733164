"""Fixtures of the serving tests: a tiny run folder (serving_run.py) and its cascade."""

from __future__ import annotations

import pytest
from serving_run import write_tiny_run

pytest.importorskip("peft")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("runs") / "tiny-agon", direction="agent_b>agent_a")


@pytest.fixture(scope="session")
def cascade(tiny_run):
    from agon_env import Cascade

    return Cascade.from_run(tiny_run)
