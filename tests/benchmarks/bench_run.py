"""Runs a script of ``benchmarks/`` in a process of its own and returns its last line, the JSON
object every benchmark ends with (the tests of this folder call it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def last_json(script: str, *flags: str, timeout: int = 600, python: str = sys.executable) -> dict[str, Any]:
    """``python benchmarks/<script> <flags>`` from the repository root: it must exit 0 (else its
    stderr's tail is the failure), and its last stdout line is parsed as JSON."""
    cmd = [python, str(BENCH / script), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
