"""The probe leaves a draft or a reading the verifier never judged out of solve, keep, fix, the
two-stage rate and the gap (issue 58, item 2; 86f3fbc counted it wrong)."""

from __future__ import annotations

from agon_env.evaluation.probe import ProbeOutcome, analyse, table_rows, verdict


def _o(pid: str, draft: bool, reader: bool, draft_unjudged=None, reader_unjudged=None) -> ProbeOutcome:
    return ProbeOutcome(pid, draft, reader, False, False, draft_unjudged, reader_unjudged)


def test_unjudged_drafts_and_readings_are_in_no_rate():
    outcomes = [
        _o("p0", True, True),
        _o("p0", False, False, draft_unjudged="timeout"),  # scored wrong, not judged
        _o("p1", False, True),
        _o("p1", False, False, reader_unjudged="error"),
    ]
    r = analyse(outcomes)
    solve, keep, fix = r["solve"], r["keep"], r["fix"]
    assert (solve["successes"], solve["trials"], solve["unjudged"]) == (1, 3, 1)  # 86f3fbc: 1 of 4
    assert (keep["successes"], keep["trials"]) == (1, 1)
    assert (fix["successes"], fix["trials"], fix["unjudged"]) == (1, 1, 1)  # 86f3fbc: 1 of 3
    assert r["two_stage"] == 2 / 3  # 86f3fbc: 2 / 4
    # per problem, judged only: p0 two-stage 1/2 vs solve 1/1, p1 two-stage 1/1 vs solve 0/2
    assert r["gap"]["mean"] == 0.25
    assert (r["score_timeouts"], r["score_errors"]) == (1, 1)


def test_a_probe_with_nothing_judged_cannot_tell():
    r = analyse([_o("p0", False, False, draft_unjudged="timeout", reader_unjudged="timeout")])
    assert r["gap"] is None and r["solve"]["trials"] == 0  # 86f3fbc: a gap of 0 from 0-scored answers
    assert verdict(r).startswith("cannot tell: the verifier judged no problem")
    assert table_rows(r)[0][1] == "–"
