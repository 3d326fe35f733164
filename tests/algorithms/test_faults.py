"""What goes wrong in a run says so in one line, and nothing hangs: scorers, disks, idle runs."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from algo_helpers import TINY_CLI as TINY
from algo_helpers import agon


def test_agon_train_returns_and_reports_a_score_that_never_returns(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = agon(
        "train", *TINY, "--steps", "2", "--imports", "hang_env", "--env", "test/hanging-scorer-v0",
        "--out-dir", str(run), timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "did not return within its wall-clock limit" in r.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(rec["score_timeouts"] == 4 for rec in records)  # 2 rollouts x 2 turns
    assert "score_timeouts" in r.stdout  # the summary table shows the count


# -- file-system faults: one line each, checked up front, the last good checkpoint kept ------------


def _train(*args: str) -> int:
    from agon_env.algorithms.cli_train import main

    return main([*TINY, *args])


@pytest.mark.parametrize("where", ["/proc/agon-run", "FILE/run"])
def test_an_unwritable_out_dir_is_refused_before_any_model_loads(tmp_path: Path, capsys, where: str) -> None:
    (tmp_path / "file").write_text("not a folder")
    out = where.replace("FILE", str(tmp_path / "file"))
    # A model that does not exist: the refusal must come first, so nothing was loaded.
    assert _train("--model", "no/such-model", "--out-dir", out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"--out-dir {out}: " in err
    assert "cannot write in /proc" in err or "is a file, not a folder" in err


def test_agon_eval_refuses_an_unwritable_out_before_sampling(capsys) -> None:
    from agon_env.evaluation.cli import eval_main

    assert eval_main(["--model", "no/such-model", "--out", "/proc/agon-eval", "--problems", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agon eval: --out /proc/agon-eval: cannot write in /proc") and err.count("\n") == 1


@pytest.mark.parametrize(("code", "said"), [(errno.ENOSPC, "No space left"), (errno.EROFS, "Read-only")])
def test_a_write_that_fails_mid_run_is_one_line_and_the_last_checkpoint_stays(
    tmp_path: Path, capsys, monkeypatch, code: int, said: str
) -> None:
    from agon_env.algorithms import checkpoint

    run, real, calls = tmp_path / "run", os.fsync, []

    def fsync(fd: int) -> None:  # the second checkpoint's write fails, as on a full or read-only disk
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(checkpoint.os, "fsync", fsync)
    assert _train("--steps", "3", "--out-dir", str(run)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"cannot write {run / 'checkpoint.pt'} ({said}" in err
    assert "keeps its checkpoint of step 1" in err and "--resume continues from it" in err
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".")) == []  # no .checkpoint.pt.tmp
    assert checkpoint.checkpoint_step(run) == 1  # the last good one still loads
    monkeypatch.setattr(checkpoint.os, "fsync", real)
    assert _train("--steps", "3", "--out-dir", str(run), "--resume") == 0
    assert checkpoint.checkpoint_step(run) == 3


def test_a_corrupt_checkpoint_names_the_file_and_what_to_do(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert _train("--steps", "1", "--out-dir", str(run)) == 0
    path = run / "checkpoint.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # cut short
    capsys.readouterr()
    assert _train("--steps", "1", "--out-dir", str(run), "--resume") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path} is not a readable checkpoint" in err and "Restore it from a copy" in err
