"""A study's outcome an answer the verifier never judged is null: in no mean, difference or
count, checked against the unit's score errors, and counted in the report (issue 58, item 2).

On 86f3fbc a results file could only hold 0 or 1 (an unjudged answer scored 0, a wrong one), and
``agon study verify`` refused a null.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agon_env.study import tables
from agon_env.study.analysis import summary_from_outcomes
from agon_env.study.verify import VerifyError, verify

SMOKE = Path(__file__).resolve().parent / "data" / "smoke_results.json"
METHOD = "standalone:agent_a"


def _unjudged_doc(errors: int) -> dict:
    doc = json.loads(SMOKE.read_text())
    unit = doc["outcomes"]["arms"]["agon"]["0"]
    unit["outcomes"][METHOD][:2] = [None, 1]  # one answer not judged, one right
    unit["score_errors"][METHOD] = errors
    doc["summary"] = summary_from_outcomes(doc)
    return doc


def test_a_null_outcome_is_left_out_and_counted(tmp_path: Path) -> None:
    doc = _unjudged_doc(errors=1)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    verify(path)  # 86f3fbc: "values of 0 or 1 expected"
    row = doc["summary"]["arms"]["agon"][METHOD]
    assert row["unjudged"] == 1
    assert row["per_seed"]["0"] == pytest.approx(1 / 5)  # 1 right of the 5 judged, not of 6
    assert "| agon-seed0 | standalone:agent_a | 1 | 0 | 1 |" in tables.markdown(doc, "study", "r.json")


def test_null_outcomes_must_match_the_units_score_errors(tmp_path: Path) -> None:
    doc = _unjudged_doc(errors=0)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(copy.deepcopy(doc)))
    with pytest.raises(VerifyError, match=r"1 null outcome\(s\), but 0 score error\(s\)"):
        verify(path)
