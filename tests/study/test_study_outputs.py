"""A study's outputs are checked by writing before any work: the study folder of register and
run, the results and docs files of report (a path they cannot write was found only after the
work, or never: a results file over a device replaced it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agon_env.study.commands.study import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sub", ["register", "run"])
def test_a_study_folder_that_cannot_be_written_is_refused_first(sub, capsys):
    assert main([sub, str(ROOT / "studies" / "smoke.yaml"), "--out", "/proc/no-study"]) == 2
    err = capsys.readouterr().err
    assert f"agon study {sub}: --out /proc/no-study: cannot write in /proc" in err and "Traceback" not in err


def _full(tmp_path: Path) -> str:
    """A /dev/full of the test's own (the code before this check renamed a file over it)."""
    import os
    import stat

    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except OSError as exc:
        pytest.skip(f"cannot make a device here: {exc}")
    return str(full)


@pytest.mark.parametrize(("flag", "where"), [("--results", "full"), ("--docs", "/proc/no-doc.md")])
def test_a_report_file_that_cannot_be_written_is_refused_first(flag, where, tmp_path, capsys):
    path = _full(tmp_path) if where == "full" else where
    assert main(["report", str(ROOT / "docs" / "results" / "study_2.json"), flag, path]) == 2
    captured = capsys.readouterr()
    assert f"agon study report: {flag} {path}: cannot write" in captured.err and captured.out == ""
