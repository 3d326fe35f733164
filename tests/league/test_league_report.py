"""league.json / league.md / pictures: written from the outcomes, read back, verified, tampering named."""

from __future__ import annotations

import json

import pytest
from rivals import ordered_league

from agon_env.league.games import Pairing, Player
from agon_env.league.pictures import MATRIX_PNG, RATINGS_PNG
from agon_env.league.report import (
    LEAGUE_MD,
    LeagueFileError,
    read_league,
    render_league,
    verify_league,
    write_league,
)

META = {"training_seats": {"run:agent": "drafter"}, "base": "tiny"}


@pytest.fixture(scope="module")
def league(tmp_path_factory):
    _, pairings = ordered_league(drafts=[0.3, 0.5, 0.7], reads=[0.4, 0.6, 0.8], n=30)
    out = tmp_path_factory.mktemp("league")
    return write_league(out, pairings, meta=META, seed=3), pairings


def test_the_files_are_written_and_the_league_verifies(league):
    path, _ = league
    for name in (LEAGUE_MD, MATRIX_PNG, RATINGS_PNG):
        assert (path.parent / name).stat().st_size > 0, name
    assert verify_league(path) == []
    assert verify_league(path.parent) == []


def test_the_document_reads_back_the_outcomes_it_was_given(league):
    path, pairings = league
    doc = read_league(path)
    assert doc.pairings == tuple(pairings)
    assert doc.seed == 3 and doc.meta == META
    assert [p.id for p in doc.players] == ["run:agent@0", "run:agent@1", "run:agent@2"]
    text = (path.parent / LEAGUE_MD).read_text()
    assert text == render_league(doc.to_json())
    for heading in ("Cross-play matrix", "Ratings", "Swapped seats", "Transitivity"):
        assert f"## {heading}" in text


def test_a_tampered_figure_is_named(league, tmp_path):
    path, _ = league
    doc = json.loads(path.read_text())
    doc["figures"]["ratings"]["challenger"][1]["rating"] += 5.0
    doc["figures"]["pairings"][0]["conversion"]["successes"] += 1
    tampered = tmp_path / "league.json"
    tampered.write_text(json.dumps(doc))
    found = verify_league(tampered)
    assert len(found) == 2, found
    assert found[0].startswith("figures.pairings[0].conversion.successes:")
    assert found[1].startswith("figures.ratings.challenger[1].rating:")


def test_a_tampered_outcome_changes_the_figures_it_feeds(league, tmp_path):
    path, _ = league
    doc = json.loads(path.read_text())
    final = doc["pairings"][0]["final_correct"]
    final[0] = not final[0]
    (tmp_path / "league.json").write_text(json.dumps(doc))
    found = verify_league(tmp_path / "league.json")
    assert any(f.startswith("figures.pairings[0].accuracy.successes") for f in found), found


def test_an_edited_rendering_is_named(league, tmp_path):
    path, _ = league
    (tmp_path / "league.json").write_text(path.read_text())
    (tmp_path / LEAGUE_MD).write_text(path.with_name(LEAGUE_MD).read_text().replace("# League", "# Leag"))
    assert verify_league(tmp_path / "league.json") == ["league.md: not the rendering of league.json"]


def test_a_file_that_is_no_league_is_refused_in_one_line(tmp_path):
    (tmp_path / "league.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(LeagueFileError, match="not a league"):
        read_league(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_league(tmp_path / "nowhere")


def test_pairings_of_different_problems_are_refused(tmp_path):
    _, pairings = ordered_league(drafts=[0.3, 0.6], reads=[0.4, 0.7], n=5)
    first = pairings[0]
    other = Pairing(first.drafter, first.challenger, ("x",) * 5, first.draft_correct, first.final_correct)
    with pytest.raises(ValueError, match="other problems"):
        write_league(tmp_path, [other, *pairings[1:]], meta={})


def test_a_league_of_one_pairing_with_unjudged_answers_writes_and_verifies(tmp_path):
    a, b = Player("run", "agent_a", 10), Player("run", "agent_b", 10)
    one = Pairing(a, b, ("q0", "q1", "q2"), (True, None, False), (None, True, True))
    path = write_league(tmp_path, [one], meta={"training_seats": {"run:agent_a": "both"}})
    assert verify_league(path) == []
    figures = read_league(path).figures
    assert figures["pairings"][0]["accuracy"]["unjudged"] == 1
    assert figures["transitivity"]["drafter"]["verdict"].startswith("untested")
    assert "Unjudged answers (1 of the cascade's)" in path.with_name(LEAGUE_MD).read_text()


def test_a_training_seat_that_is_no_seat_is_refused(tmp_path):
    _, pairings = ordered_league(drafts=[0.3, 0.6], reads=[0.4, 0.7], n=5)
    with pytest.raises(ValueError, match="run:agent: 'reader'"):
        write_league(tmp_path, pairings, meta={"training_seats": {"run:agent": "reader"}})
