"""``results.json``'s one reader and writer, and what a format change does to recorded files: a
written file reads back as itself, a summary field added after a file was recorded does not fail
``verify``, and a missing arm or method still does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agon_env.study import verify as verify_module
from agon_env.study.results_file import ResultsFileError, read_results, write_results
from agon_env.study.verify import VerifyError, verify

RECORDED = Path(__file__).resolve().parents[2] / "docs" / "results" / "exchange_cpu.json"


def test_a_written_results_file_reads_back_as_itself(tmp_path: Path) -> None:
    doc = json.loads(RECORDED.read_text())
    write_results(doc, tmp_path / "results.json")
    back = read_results(tmp_path)  # a study folder names its results.json
    assert back.document == doc and back.path == tmp_path / "results.json"
    assert back.outcomes is back.document["outcomes"] and back.summary == doc["summary"]
    assert back.test_ids == doc["problems"]["test"]["ids"]
    write_results(back, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == (tmp_path / "results.json").read_text()


@pytest.mark.parametrize("text", ["{}", '{"outcomes": {"arms": []}}', "[]"])
def test_a_file_that_is_no_results_file_is_refused(text: str, tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(text)
    with pytest.raises(ResultsFileError, match="not a study results file"):
        read_results(tmp_path)


def _with_a_new_field(real: Any) -> Any:
    """``summary_from_outcomes`` as a later version might write it: one more field at the top, in
    every arm's method and in every paired comparison."""

    def summary(doc: dict[str, Any], confidence: float | None = None) -> dict[str, Any]:
        out = real(doc, confidence)
        out["median_length"] = 1.0
        for methods in out["arms"].values():
            for row in methods.values():
                if isinstance(row, dict):
                    row["median_length"] = 1.0
        for row in out["paired"].values():
            row["effect_size"] = 0.2
        return out

    return summary


def test_a_summary_field_added_later_does_not_fail_a_recorded_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        verify_module, "summary_from_outcomes", _with_a_new_field(verify_module.summary_from_outcomes)
    )
    assert verify(RECORDED)["summary"]["arms"]


@pytest.mark.parametrize(
    ("cut", "where"),
    [
        (lambda s: s["arms"].pop("agon-none"), r"summary\.arms\.agon-none: missing"),
        (lambda s: s["arms"]["agon"].pop("standalone:agent_b"), r"standalone:agent_b: missing"),
        (lambda s: s["paired"].pop(next(iter(s["paired"]))), r"summary\.paired\..*: missing"),
    ],
)
def test_a_recorded_summary_missing_an_arm_method_or_comparison_still_fails(
    cut: Any, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        verify_module, "summary_from_outcomes", _with_a_new_field(verify_module.summary_from_outcomes)
    )
    doc = json.loads(RECORDED.read_text())
    cut(doc["summary"])
    (tmp_path / "results.json").write_text(json.dumps(doc))
    with pytest.raises(VerifyError, match=where):
        verify(tmp_path / "results.json")
