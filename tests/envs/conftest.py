"""Fixtures for the env tests."""

from __future__ import annotations

import os

import pytest

from agon_env.envs.tasks import verify

# A stand-in for math-verify, shadowing the real one in the worker process via PYTHONPATH.
FAKE_MATH_VERIFY = {
    "raises": "def parse(text, **kw):\n    raise ValueError('fake verifier failure at 100%')\n",
    "dies": (
        "import os, sys\n"
        "def parse(text, **kw):\n"
        "    sys.stderr.write('fake verifier died loudly\\n'); sys.stderr.flush(); os._exit(3)\n"
    ),
    "hangs": "import time\ndef parse(text, **kw):\n    time.sleep(60)\n",
}


@pytest.fixture
def fake_math_verify(tmp_path, monkeypatch):
    """``use(kind)`` points a fresh worker at a math_verify that raises, dies or hangs."""
    workers = []

    def use(kind: str) -> None:
        pkg = tmp_path / kind / "math_verify"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(FAKE_MATH_VERIFY[kind] + "def verify(*a, **kw):\n    return True\n")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pkg.parent), os.environ.get("PYTHONPATH", "")]))
        workers.append(verify._Worker())
        monkeypatch.setattr(verify, "_WORKER", workers[-1])

    yield use
    for w in workers:
        w.close()
