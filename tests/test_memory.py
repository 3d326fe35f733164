"""Sizes that cannot fit in memory are refused up front, with the estimate, before a run folder
exists (they ran until killed, leaving a half-made folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agon_env.config import TrainConfig
from agon_env.memory import (
    TOKEN_BYTES,
    TURN_BYTES,
    TURNS,
    DoesNotFit,
    available_bytes,
    check_fits,
    step_bytes,
)


def test_the_estimate_is_the_stated_formula() -> None:
    cfg = TrainConfig()
    episodes = cfg.batch_problems * cfg.grpo.num_generations
    assert step_bytes(cfg) == episodes * TURNS * (TURN_BYTES + cfg.sampling.max_new_tokens * TOKEN_BYTES)
    cfg.grpo.num_generations *= 10
    assert step_bytes(cfg) == 10 * episodes * TURNS * (TURN_BYTES + cfg.sampling.max_new_tokens * TOKEN_BYTES)


def test_a_step_over_the_memory_left_is_refused_naming_the_sizes() -> None:
    cfg = TrainConfig()
    check_fits(cfg, available=step_bytes(cfg))  # exactly fits
    with pytest.raises(DoesNotFit, match=r"= 2 × 4 episodes .*: about 164 KiB, and this machine has 1 KiB"):
        check_fits(cfg, available=1024)


def test_the_memory_left_is_read_from_meminfo(tmp_path: Path) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:  4000 kB\nMemAvailable:    2048 kB\n")
    assert available_bytes(info) == 2048 * 1024
    pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")  # without meminfo: the OS's count
    assert abs(available_bytes(tmp_path / "none") - pages) < 2**30


@pytest.mark.parametrize("flag", ["--batch-problems", "--n"])
def test_agon_train_refuses_an_absurd_size_before_its_folder_exists(tmp_path: Path, flag: str) -> None:
    out = tmp_path / "run"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agon_env.cli",
            "train",
            "--model",
            "tiny",
            flag,
            "100000000",
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and "TiB" in r.stderr and "available; lower --batch-problems" in r.stderr, (
        r.stderr
    )
    assert not out.exists()
