"""`agon probe` and `agon plot`: output paths checked before any work; --debug and keywords as in train."""

from __future__ import annotations

from pathlib import Path

import pytest

from agon_env.evaluation.commands.probe import run_probe_cli


@pytest.mark.parametrize("out", ["/proc/agon-probe.json", "FOLDER"])
def test_an_unwritable_out_is_refused_before_any_model_loads(tmp_path: Path, capsys, out: str) -> None:
    out = out.replace("FOLDER", str(tmp_path))
    # A model that does not exist: the refusal must come first, so nothing was loaded or sampled.
    assert run_probe_cli(["--model", "no/such-model", "--problems", "2", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"agon probe: --out {out}: ") and err.count("\n") == 1
    assert "cannot write in /proc" in err or "is a folder, not a file" in err


def test_debug_shows_the_traceback_as_train_and_eval_do(capsys) -> None:
    assert run_probe_cli(["--problems", "0"]) == 2
    assert "--problems 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--problems 0"):
        run_probe_cli(["--problems", "0", "--debug"])


def test_a_misspelt_task_keyword_gets_a_did_you_mean(capsys) -> None:
    argv = [
        "--model",
        "no/such-model",
        "--env",
        "agon/arith-v0",
        "--env-kwargs",
        "dificulty=3",
        "--out",
        "/tmp/x.json",
    ]
    assert run_probe_cli(argv) == 2
    err = capsys.readouterr().err
    assert "unknown keyword 'dificulty' (did you mean 'difficulty'?)" in err and err.count("\n") == 1


def test_agon_plot_refuses_an_unwritable_out_before_reading_runs(tmp_path: Path, capsys) -> None:
    from agon_env.evaluation.commands.eval import plot_main

    # The run does not exist either: the output is checked first.
    assert plot_main([str(tmp_path / "no-run"), "--out", "/proc/agon-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agon plot: --out /proc/agon-plots: cannot write in /proc") and err.count("\n") == 1
