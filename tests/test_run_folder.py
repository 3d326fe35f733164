"""The run folder's one reader of ``metrics.jsonl``: a killed run's torn last line is skipped,
a damaged line before it is an error naming the file and line."""

from __future__ import annotations

import json

import pytest

from agon_env.errors import UserError
from agon_env.run_folder import RunFolderError, read_metrics


def _write(folder, lines):
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_the_torn_last_line_of_a_killed_run_is_skipped(tmp_path):
    _write(
        tmp_path,
        [json.dumps({"step": 0, "acc/drafter": 0.5}), json.dumps({"step": 1}), '{"step": 2, "acc/dr'],
    )
    assert read_metrics(tmp_path) == [{"step": 0, "acc/drafter": 0.5}, {"step": 1}]


def test_blank_lines_and_a_missing_log(tmp_path):
    _write(tmp_path, [json.dumps({"step": 0}), "", json.dumps({"step": 1}), ""])
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1]
    assert read_metrics(tmp_path / "nothing-here") == []


@pytest.mark.parametrize("bad", ['{"step": 1, "acc/dr', "[1, 2]"])
def test_a_damaged_line_before_the_last_names_the_file_and_line(tmp_path, bad):
    _write(tmp_path, [json.dumps({"step": 0}), bad, json.dumps({"step": 2})])
    with pytest.raises(RunFolderError, match=r"metrics\.jsonl line 2 is not a JSON object") as err:
        read_metrics(tmp_path)
    assert isinstance(err.value, UserError) and "\n" not in str(err.value)


def test_a_file_that_takes_no_bytes_is_refused_by_writing_one(tmp_path):
    from agon_env.run_folder import check_file_writable

    # /dev/full opens for writing like any file (its folder takes files too): only a write fails.
    with pytest.raises(RunFolderError, match=r"--out /dev/full: cannot write it \(No space left on device\)"):
        check_file_writable("/dev/full", "--out")
    kept = tmp_path / "answers.jsonl"
    kept.write_bytes(b'{"id": "1"}\n')
    check_file_writable(kept, "--out")
    check_file_writable(tmp_path / "new" / "file.json", "--out")
    assert kept.read_bytes() == b'{"id": "1"}\n' and not (tmp_path / "new").exists()


def test_a_write_cut_short_is_taken_back_and_names_the_file(tmp_path, monkeypatch):
    import errno
    import os

    from agon_env import run_folder
    from agon_env.run_folder import append_lines

    path = tmp_path / "samples.jsonl"
    append_lines(path, ['{"step": 0}'])
    real = os.write

    def full(fd, data):  # the disk fills half-way through the line
        real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_folder.os, "write", full)
    with pytest.raises(OSError) as e:
        append_lines(path, ['{"step": 1, "text": "a long completion"}'])
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
    assert path.read_text() == '{"step": 0}\n'  # no half line left behind


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("step-000010", 10),
        ("step-000000", 0),
        ("step-1234567", 1234567),
        ("step-10", None),
        ("steps-000010", None),
        ("step-00001x", None),
        (".step-000010.tmp", None),
        ("agent_a", None),
    ],
)
def test_a_snapshot_folders_name_is_its_step_and_nothing_else_is(name, step):
    from agon_env.run_folder import snapshot_step  # new in issue 61: on 71a440e this import fails

    assert snapshot_step(name) == step


def test_a_snapshot_cut_short_is_not_listed(tmp_path):
    from agon_env.run_folder import RunFolder

    folder = RunFolder(tmp_path)
    (folder.snapshot_dir(10) / ".agent_a.tmp123").mkdir(parents=True)  # a write killed mid-way
    (folder.snapshot(20, "agent_b")).mkdir(parents=True)
    assert folder.snapshot_steps() == [20] and folder.snapshot_adapters(20) == ["agent_b"]
