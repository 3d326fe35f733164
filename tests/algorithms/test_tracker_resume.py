"""Trackers across ``kill -9`` and ``--resume``: one tracker run whose scalars equal metrics.jsonl."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_trackers import _wandb_records

ROOT = Path(__file__).resolve().parents[2]


def _expected(run: Path) -> dict[int, dict[str, Any]]:
    records = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: {k: v for k, v in r.items() if k != "step" and v is not None} for r in records}


def _wandb_history(wandb_dir: Path) -> tuple[set[str], dict[int, dict[str, Any]]]:
    """The run ids of every offline run under ``wandb_dir`` and their history, in the order written
    (a later value of a step over an earlier one, as a resumed run's sync leaves it)."""
    ids, history = set(), {}
    for folder in sorted(wandb_dir.glob("wandb/offline-run-*")):
        ids.add(folder.name.rsplit("-", 1)[-1])
        for (path,) in [list(folder.glob("run-*.wandb"))]:
            for rec in _wandb_records(path):
                if rec.WhichOneof("record_type") == "history":
                    items = {
                        i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item
                    }
                    history[items["_step"]] = {
                        k: v for k, v in items.items() if not k.startswith(("_", "samples"))
                    }
    return ids, history


@pytest.mark.slow
def test_wandb_and_trackio_equal_metrics_jsonl_after_kill_9_and_resume(tmp_path: Path) -> None:
    pytest.importorskip("wandb", reason="wandb is an optional extra: pip install 'agon-env[track]'")
    pytest.importorskip("trackio", reason="trackio is an optional extra: pip install 'agon-env[track]'")
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(tmp_path / "wandb-dir"),
        "TRACKIO_DIR": str(tmp_path / "trackio"),
        "TRACKIO_PROJECT": "agon-resume",
    }
    (tmp_path / "wandb-dir").mkdir()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    flags = [
        *("--model", "tiny", "--steps", "8", "--report-to", "wandb", "trackio"),
        *("--batch-problems", "1", "--n", "2", "--sampling.max-new-tokens", "8", "--threads", "1"),
        *("--heldout-problems", "0", "--time-budget-min", "0", "--no-progress", "--out-dir", "run"),
    ]
    command = [sys.executable, "-m", "agon_env.cli", "train", *flags]
    run = tmp_path / "run"
    first = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and first.poll() is None:
        metrics = run / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    assert first.poll() is None, "the run ended before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)  # the run and the trackers' helper processes it started
    first.wait()
    r = subprocess.run(
        [*command, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    expected = _expected(run)
    assert sorted(expected) == list(range(8))

    assert not (run / "wandb").exists()  # WANDB_DIR is where its files go
    ids, history = _wandb_history(tmp_path / "wandb-dir")
    assert len(ids) == 1 and (run / "wandb-run-id.txt").read_text().strip() in ids  # one run, resumed
    assert history == expected

    name = (run / "trackio-run-name.txt").read_text().strip()
    check = (
        "import json\n"
        "from trackio.sqlite_storage import SQLiteStorage\n"
        f"print(json.dumps(SQLiteStorage.get_logs('agon-resume', {name!r}), default=str))\n"
    )
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    logged = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(row["step"] for row in logged) == list(range(8))  # one row per step
    rows = {row["step"]: {k: v for k, v in row.items() if k in expected[row["step"]]} for row in logged}
    assert rows == expected
