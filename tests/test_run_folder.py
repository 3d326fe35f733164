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
