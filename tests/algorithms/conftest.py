"""Fixtures shared by the algorithm tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture
def parity_on_path(monkeypatch):
    """This folder importable (``parity_env``, ``broken_env`` for child processes), and the
    torch thread count restored afterwards (the trainer sets it from ``--threads``)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
