"""`agon answer`: one question, and a JSONL file answered in batches, resumable by id."""

from __future__ import annotations

import json

from agon_env.cli import main


def agon(*argv):
    return main([str(a) for a in argv])


def test_one_question_prints_the_final_answer_or_both_stages(tiny_run, capsys):
    assert agon("answer", tiny_run, "What is 2 + 3?", "--show") == 0
    out = capsys.readouterr().out
    assert "--- draft (agent_b" in out and "--- the challenger read\nWhat is 2 + 3?" in out


def test_a_file_is_answered_and_resumed_by_id(tiny_run, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    rows = [{"id": "a", "question": "What is 2 + 3?", "answer": "5"}, {"question": "What is 4 * 2?"}]
    rows.append({"id": "c", "question": "What is 9 - 1?"})
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    # As a kill leaves it: one answer written, the next cut off mid-line.
    out.write_text(json.dumps({"id": "a", "question": "What is 2 + 3?"}) + "\n" + '{"id": "2", "quest')
    assert agon("answer", tiny_run, "--file", source, "--out", out, "--batch-size", "1") == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["a", "2", "c"]  # "a" was skipped, the torn "2" answered again
    assert lines[1]["draft"]["adapter"] == "agent_b" and "challenger_text" in lines[1]
    assert lines[1]["correct"] is None
    assert "answered 2 question(s)" in capsys.readouterr().out
    assert agon("answer", tiny_run, "--file", source, "--out", out) == 0  # nothing left to do
    assert len(out.read_text().splitlines()) == 3


def test_mistakes_are_one_line(tiny_run, tmp_path, capsys):
    assert agon("answer", tiny_run) == 2
    assert "give a QUESTION or --file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"q": 1}\n')
    assert agon("answer", tiny_run, "--file", bad, "--out", tmp_path / "o.jsonl") == 2
    assert 'line 1: not a JSON object with a "question"' in capsys.readouterr().err
    assert agon("answer", tmp_path / "nope", "hi") == 2
    assert "no such run folder" in capsys.readouterr().err
    good = tmp_path / "good.jsonl"
    good.write_text('{"question": "What is 2 + 3?"}\n')
    assert agon("answer", tiny_run, "--file", good, "--out", tmp_path / "o.jsonl", "--batch-size", "0") == 2
    assert "--batch-size 0: a batch holds at least one question" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_an_out_file_that_takes_no_bytes_is_refused_before_any_model_loads(tmp_path, capsys):
    questions = tmp_path / "in.jsonl"
    questions.write_text('{"id": "1", "question": "What is 2 + 2?"}\n')
    # The run does not exist either: --out is refused first, so no model would have loaded.
    assert main(["answer", str(tmp_path / "no-run"), "--file", str(questions), "--out", "/dev/full"]) == 2
    assert (
        "agon answer: --out /dev/full: cannot write it (No space left on device)" in capsys.readouterr().err
    )
