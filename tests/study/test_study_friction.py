"""Newcomer friction (issue #57 item 6): a closed pipe, the time estimate, the console's words."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agon_env

ROOT = Path(__file__).resolve().parents[2]
CODE = Path(agon_env.__file__).resolve().parents[1]
"""The checkout whose package the tests import: the children run the same one."""


@pytest.mark.parametrize("sub", ["status", "register"])
def test_a_reader_that_leaves_gets_no_traceback(tmp_path: Path, sub: str) -> None:
    plan = tmp_path / "plan.yaml"
    shutil.copy(ROOT / "studies" / "smoke.yaml", plan)
    (tmp_path / "st").mkdir()
    shutil.copy(plan, tmp_path / "st" / "plan.yaml")
    argv = {"status": [str(tmp_path / "st")], "register": [str(plan), "--out", str(tmp_path / "reg")]}[sub]
    env = {**os.environ, "PYTHONPATH": str(CODE)}
    p = subprocess.Popen(
        [sys.executable, "-m", "agon_env.cli", "study", sub, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # `| head -0`: the reader is gone before the first line
    err = p.stderr.read().decode()
    assert (p.wait(timeout=120), err) == (141, "")
