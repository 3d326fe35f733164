"""What goes wrong in a run says so in one line, and nothing hangs: scorers, disks, idle runs."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from algo_helpers import TINY_CLI as TINY
from algo_helpers import agon


def test_a_score_that_never_returns_stops_the_run_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    start = time.monotonic()
    r = agon(
        "train",
        *TINY,
        "--steps",
        "50",
        "--imports",
        "hang_env",
        "--env",
        "test/hanging-scorer-v0",
        "--out-dir",
        str(run),
        timeout=240,
    )
    took = time.monotonic() - start
    assert r.returncode == 2, r.stderr[-3000:]
    assert took < 120  # 50 steps of 4 answers one after another would wait 200 limits
    # The task's own limit (0.2 s) is named, never the 120 s default; the warning says it too.
    assert "its score_timeout of 0.2 s" in r.stderr and "default 120" not in r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("agon train:")]
    assert "task 'hanging-scorer'" in line and "all 4 answers of step 0" in line and "4 timed out" in line
    assert not (run / "metrics.jsonl").exists() or not (run / "metrics.jsonl").read_text().strip()


def test_a_stage_of_hanging_scorers_costs_about_one_limit() -> None:
    import threading

    import agon_env
    from agon_env.agents import ScriptedAgent
    from agon_env.algorithms.rollout import rollout
    from agon_env.envs import scoring
    from agon_env.envs.tasks.base import ListTask, Problem

    release = threading.Event()

    class Hangs(ListTask):
        score_timeout = 1.0

        def score(self, problem: Problem, answer: str) -> bool:
            return release.wait()

    task = Hangs([Problem(str(i), f"Problem {i}?", "0") for i in range(4)])
    env = agon_env.make("agon/math-v0", task=task, mode="solo")
    agent = ScriptedAgent("a", ["x <summary>s</summary><answer>1</answer>"])
    start = time.monotonic()
    try:
        with pytest.warns(UserWarning):
            batch = rollout(env, {"agent_a": agent}, [0, 1, 2, 3], 4, drafter="agent_a")
    finally:
        release.set()
    took = time.monotonic() - start
    assert all(t.score_timeout for t in batch.turns) and len(batch.turns) == 16
    # One wave of scoring.score_workers() calls waits one limit; the rest are not started.
    assert took < 1.9, f"{took:.1f} s with {scoring.score_workers()} workers"


# -- file-system faults: one line each, checked up front, the last good checkpoint kept ------------


def _train(*args: str) -> int:
    from agon_env.algorithms.commands.train import main

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
    from agon_env.evaluation.commands.eval import eval_main

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


def test_most_answers_unjudged_over_several_steps_stops_the_run() -> None:
    from types import SimpleNamespace

    from agon_env.algorithms.distributed import DistContext
    from agon_env.algorithms.rollout import HOPELESS_STEPS, ScoringWatch, TaskScoreError

    def step(timeouts: int, of: int = 4) -> SimpleNamespace:
        turns = [SimpleNamespace(answer="1", score_error=None, score_timeout=i < timeouts) for i in range(of)]
        return SimpleNamespace(turns=turns)

    task = SimpleNamespace(name="slow", score_timeout=3.0)
    watch = ScoringWatch(task)
    watch.check(step(3), 0, DistContext())
    watch.check(step(1), 1, DistContext())  # a good step: the count starts again
    for s in range(2, 2 + HOPELESS_STEPS - 1):
        watch.check(step(3), s, DistContext())
    with pytest.raises(TaskScoreError) as stopped:
        watch.check(step(3), 2 + HOPELESS_STEPS - 1, DistContext())
    said = str(stopped.value)
    assert said.startswith("task 'slow': score() gave no verdict on 9 of 12 answers over steps 2-4")
    assert "its score_timeout of 3 s" in said and "\n" not in said


@pytest.mark.parametrize("size", [5_000, 50_000])
def test_a_checkpoint_cut_short_is_called_truncated_not_a_permission_problem(
    tmp_path: Path, size: int
) -> None:
    import torch

    from agon_env.algorithms.checkpoint import read_checkpoint
    from agon_env.run_folder import RunFolderError

    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1, "adapters": {"a": torch.randn(200, 200)}}, path)
    path.write_bytes(path.read_bytes()[:size])
    with pytest.raises(RunFolderError) as refused:
        read_checkpoint(path)
    said = str(refused.value)
    assert f"{path} is truncated or corrupt" in said and "permissions" not in said


def test_a_full_disk_while_plotting_names_the_file(tmp_path: Path, capsys, monkeypatch) -> None:
    from agon_env.algorithms import run_log

    def full(fig, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as matplotlib's write says it: no file

    monkeypatch.setattr(run_log, "save", full)
    run = tmp_path / "run"
    assert _train("--steps", "1", "--out-dir", str(run)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write {run / 'curves.png'} (No space left on device)" in err


def test_a_negative_heldout_size_is_refused_up_front(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert _train("--model", "no/such-model", "--heldout-problems", "-3", "--out-dir", str(run)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "heldout_problems = -3: use 0 (no held-out check)" in err
