"""``--report-to``: the trackers get what the run folder records, and a missing one is one line."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agon_env.algorithms import trackers
from agon_env.algorithms.run_log import MetricsLogger
from agon_env.algorithms.trackers import SAMPLE_COLUMNS, refusal, sample_rows
from agon_env.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _turn(role: str, episode: int, **kw: Any) -> dict[str, Any]:
    base = {"seat": "agent_a" if role == "drafter" else "agent_b", "role": role, "episode": episode}
    base |= {"problem": f"What is {episode} + 1?", "reward": 0.0, "correct": False, "format_ok": False}
    return base | {
        "tokens": 4,
        "prompt": "p",
        "completion": "c",
        "summary": None,
        "answer": None,
        "shown": "",
    }


def test_sample_rows_put_a_draft_beside_its_challenge():
    samples = [
        _turn("drafter", 0) | {"summary": "added", "answer": "2", "correct": True, "reward": 2.5},
        _turn("drafter", 1) | {"summary": "guessed", "answer": "9", "reward": 0.5},
        _turn("challenger", 0) | {"shown": "Summary: added", "answer": "2", "correct": True, "reward": 2.5},
        _turn("challenger", 1) | {"shown": "Summary: guessed", "answer": "3", "correct": True, "reward": 3.5},
    ]
    rows = [dict(zip(SAMPLE_COLUMNS, r, strict=True)) for r in sample_rows(7, samples)]
    assert [(r["step"], r["episode"], r["problem"]) for r in rows] == [
        (7, 0, "What is 0 + 1?"),
        (7, 1, "What is 1 + 1?"),
    ]
    second = rows[1]
    assert (second["drafter"], second["draft summary"], second["draft answer"], second["draft reward"]) == (
        "agent_a",
        "guessed",
        "9",
        0.5,
    )
    assert (second["challenger"], second["shown to challenger"], second["challenge answer"]) == (
        "agent_b",
        "Summary: guessed",
        "3",
    )
    assert (second["draft correct"], second["challenge correct"], second["challenge reward"]) == (
        False,
        True,
        3.5,
    )
    (solo,) = sample_rows(0, [_turn("drafter", 4) | {"answer": "5"}])
    assert (
        solo[SAMPLE_COLUMNS.index("draft answer")] == "5" and solo[SAMPLE_COLUMNS.index("challenger")] == ""
    )


def test_report_to_names_are_checked_before_anything_runs(monkeypatch, capsys):
    assert refusal(["tensorboard"]) is None and refusal(["none"]) is None and refusal([]) is None
    assert "unknown tracker 'mlflow'" in str(refusal(["mlflow"]))
    assert "name it alone" in str(refusal(["none", "wandb"]))
    monkeypatch.setitem(trackers.PACKAGES, "wandb", "wandb_is_not_installed_here")
    monkeypatch.delenv("AGON_DEBUG", raising=False)
    assert main(["train", "--model", "tiny", "--report-to", "tensorboard", "wandb", "--print-config"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "agon train: invalid training config: report_to = ['tensorboard', 'wandb']: wandb is not installed: "
        "pip install wandb_is_not_installed_here (or pip install 'agon-env[track]'), "
        "or leave it out of --report-to"
    )


def test_report_to_none_writes_the_run_folder_only(tmp_path):
    logger = MetricsLogger(tmp_path, total_steps=1, progress=False, report_to=["none"])
    logger.log(0, {"acc/drafter": 1.0}, [_turn("drafter", 0)])
    logger.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "samples.jsonl"]


def _wandb_records(path: Path) -> list[Any]:
    """The records of a ``.wandb`` file, a LevelDB-style log of protobuf records (32 KiB blocks, a
    7-byte header per chunk: CRC, length, type FULL=1 FIRST=2 MIDDLE=3 LAST=4), read with wandb's
    own protobuf types: wandb ships no reader, and an offline run has no server to ask."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a .wandb file"
    out, pos, block, pending = [], 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pending = (b"" if kind in (1, 2) else pending) + data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


@pytest.mark.slow
def test_wandb_and_trackio_get_the_scalars_of_metrics_jsonl(tmp_path):
    pytest.importorskip("wandb", reason="wandb is an optional extra: pip install 'agon-env[track]'")
    pytest.importorskip("trackio", reason="trackio is an optional extra: pip install 'agon-env[track]'")
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "TRACKIO_DIR": str(tmp_path / "trackio"),
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    flags = [
        *("--model", "tiny", "--steps", "2", "--report-to", "tensorboard", "wandb", "trackio"),
        *("--batch-problems", "1", "--n", "2", "--sampling.max-new-tokens", "8", "--threads", "1"),
        *("--heldout-problems", "0", "--time-budget-min", "0", "--no-progress", "--out-dir", "run"),
    ]
    r = subprocess.run(
        [sys.executable, "-m", "agon_env.cli", "train", *flags],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "run"
    records = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    expected = {
        rec["step"]: {k: v for k, v in rec.items() if k != "step" and v is not None} for rec in records
    }
    assert sorted(expected) == [0, 1] and all(len(v) > 20 for v in expected.values())

    (wandb_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    logged = _wandb_records(wandb_file)
    history = {}
    for rec in logged:
        if rec.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            history[items["_step"]] = items
    scalars = {
        s: {k: v for k, v in h.items() if not k.startswith(("_", "samples"))} for s, h in history.items()
    }
    assert scalars == expected
    assert all(history[s]["samples/_type"] == "table-file" for s in (0, 1))
    table = json.loads((wandb_file.parent / "files" / history[0]["samples/path"]).read_text())
    assert table["columns"] == list(SAMPLE_COLUMNS) and len(table["data"]) == 2  # samples_per_role episodes
    sample = json.loads((run / "samples.jsonl").read_text().splitlines()[0])
    assert table["data"][0][SAMPLE_COLUMNS.index("problem")] == sample["problem"] != ""
    (config,) = [rec.run.config for rec in logged if rec.WhichOneof("record_type") == "run"]
    sent = {i.key: json.loads(i.value_json) for i in config.update}
    assert sent["steps"] == 2 and sent["grpo"]["num_generations"] == 2 and sent["report_to"][1] == "wandb"

    name = (run / "trackio-run-name.txt").read_text().strip()
    check = (
        "import json, sys\n"
        "from trackio.sqlite_storage import SQLiteStorage\n"
        f"logs = SQLiteStorage.get_logs('agon-env', {name!r})\n"
        f"config = SQLiteStorage.get_run_config('agon-env', {name!r})\n"
        "print(json.dumps({'logs': logs, 'steps': config['steps']}, default=str))\n"
    )
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    rows = {row["step"]: row for row in out["logs"]}
    assert {s: {k: v for k, v in row.items() if k in expected[s]} for s, row in rows.items()} == expected
    assert all(set(row) - set(expected[s]) == {"samples", "step", "timestamp"} for s, row in rows.items())
    assert rows[0]["samples"]["_type"] == "trackio.table" and out["steps"] == 2
