"""The league runner: its schedule, its resumable record, its refusals, and a real league of tiny
adapters (issue 61, items 2 and 4). Every module tested here is new: on 71a440e each test fails
at its import."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from agon_env.config import TrainConfig, to_dict

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _players(n: int = 4):
    from agon_env.league.games import Player

    return [Player("run", f"agent_{'ab'[i % 2]}", 10 * (1 + i // 2)) for i in range(n)]


PROBLEMS = ("p0", "p1", "p2", "p3", "p4")


def _outcome(*key: str) -> bool | None:
    return [True, False, None][hashlib.sha256("|".join(key).encode()).digest()[0] % 3]


def scripted(drafter, challenger):
    """A pairing that depends only on who plays and the problem (as a real one's seeds do)."""
    from agon_env.league.games import Pairing

    drafts = tuple(_outcome(drafter.id, p) for p in PROBLEMS)
    finals = tuple(_outcome(drafter.id, challenger.id, p) for p in PROBLEMS)
    return Pairing(drafter, challenger, PROBLEMS, drafts, finals)


def test_the_schedule_has_every_ordered_pair_each_next_to_its_swap():
    from agon_env.league.play import schedule

    players = _players(4)
    plan = schedule(players, seed=0)
    assert len(plan) == 12 and len(set(plan)) == 12 and all(d != c for d, c in plan)
    assert all(plan[i] == plan[i + 1][::-1] for i in range(0, 12, 2))
    assert schedule(players, seed=0, pairs=4) == plan[:4]
    assert schedule(players, seed=1) != plan  # the order is the seed's


def test_a_killed_league_continues_to_the_same_record(tmp_path):
    from agon_env.league.play import PAIRINGS, play_league

    players = _players(4)
    whole = play_league(players, PROBLEMS, scripted, tmp_path / "whole")
    assert whole.left == 0 and whole.played_now == 12
    calls = []

    def killed_after_three(d, c):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return scripted(d, c)

    with pytest.raises(KeyboardInterrupt):
        play_league(players, PROBLEMS, killed_after_three, tmp_path / "killed")
    again = play_league(players, PROBLEMS, scripted, tmp_path / "killed")
    assert again.played_now == 9 and again.pairings == whole.pairings
    assert (tmp_path / "killed" / PAIRINGS).read_text().splitlines()[0] == (
        (tmp_path / "whole" / PAIRINGS).read_text().splitlines()[0]
    )
    assert sorted((tmp_path / "killed" / PAIRINGS).read_text().splitlines()) == sorted(
        (tmp_path / "whole" / PAIRINGS).read_text().splitlines()
    )


def test_pairs_and_a_budget_bound_the_league_and_a_rerun_goes_on(tmp_path):
    from agon_env.league.play import play_league

    players = _players(4)
    cut = play_league(players, PROBLEMS, scripted, tmp_path, pairs=4)
    assert (cut.played_now, cut.left) == (4, 0)
    clock = iter(range(0, 10_000, 40))  # every pairing "takes" 40 s: a 2-minute budget holds 2

    import agon_env.league.play as play

    real = play.time.perf_counter
    play.time.perf_counter = lambda: float(next(clock))
    try:
        more = play_league(players, PROBLEMS, scripted, tmp_path, minutes=2)
    finally:
        play.time.perf_counter = real
    assert more.played_now < 8 and more.left == 8 - more.played_now
    assert play_league(players, PROBLEMS, scripted, tmp_path).left == 0


def test_another_leagues_folder_is_refused_in_one_line(tmp_path):
    from agon_env.league.play import play_league
    from agon_env.league.players import LeagueError

    play_league(_players(4), PROBLEMS, scripted, tmp_path, pairs=2)
    with pytest.raises(LeagueError, match="another league") as e:
        play_league(_players(4), PROBLEMS[:3], scripted, tmp_path)
    assert "\n" not in str(e.value)


def _fake_run(folder: Path, model: str) -> Path:
    cfg = TrainConfig()
    cfg.model.name = model
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    for step in (10, 20):
        (folder / "snapshots" / f"step-{step:06d}" / "agent_a").mkdir(parents=True)
    (folder / "adapters" / "agent_a").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(30)))
    return folder


def test_players_are_every_snapshot_and_the_final_adapters_of_one_base(tmp_path):
    from agon_env.league.players import LeagueError, league_contenders

    a = _fake_run(tmp_path / "a", "HuggingFaceTB/SmolLM2-135M-Instruct")
    found = [c.player.id for c in league_contenders([("a", a)])]
    assert found == ["a:agent_a@10", "a:agent_a@20", "a:agent_a@30"]
    b = _fake_run(tmp_path / "b", "Qwen/Qwen3-0.6B")
    with pytest.raises(LeagueError, match="different bases") as e:
        league_contenders([("a", a), ("b", b)])
    assert "\n" not in str(e.value) and "a on HuggingFaceTB" in str(e.value)


TINY = ["--model", "tiny", "--env", "agon/arith-v0", "--env.kwargs", "difficulty=1", "--batch-problems", "2"]
TINY += [
    "--n",
    "2",
    "--sampling.max-new-tokens",
    "6",
    "--no-progress",
    "--threads",
    "1",
    "--report-to",
    "none",
]
TINY += ["--heldout-problems", "0", "--time-budget-min", "0", "--divergence-kl-rollouts", "0"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from agon_env.algorithms.commands.train import main

    run = tmp_path_factory.mktemp("league") / "agon-tiny"
    assert main([*TINY, "--steps", "2", "--snapshot-every", "1", "--out-dir", str(run)]) == 0
    return run


def test_a_real_league_drafts_once_per_drafter_and_resumes_to_the_same_pairings(
    tiny_run, tmp_path, monkeypatch
):
    from agon_env.league.commands.league import LeagueArgs, play
    from agon_env.league.play import Arena

    args = LeagueArgs(runs=[str(tiny_run)], problems=3, quiet=True)
    runs = [("agon-tiny", tiny_run)]
    whole = play(runs, args, tmp_path / "whole")
    ids = {p.drafter.id for p in whole.pairings}
    assert ids == {f"agon-tiny:{a}@{s}" for a in ("agent_a", "agent_b") for s in (1, 2)}
    assert whole.left == 0 and len(whole.pairings) == 12
    assert all(len(p.problems) == 3 and p.problems[0].startswith("test-") for p in whole.pairings)
    real, calls = Arena.play, []

    def killed_after_five(self, d, c):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real(self, d, c)

    monkeypatch.setattr(Arena, "play", killed_after_five)
    with pytest.raises(KeyboardInterrupt):
        play(runs, args, tmp_path / "killed")
    monkeypatch.setattr(Arena, "play", real)
    again = play(runs, args, tmp_path / "killed")
    assert again.played_now == 7 and again.pairings == whole.pairings


def test_each_drafter_drafts_each_problem_once_whoever_challenges(tiny_run, tmp_path, monkeypatch):
    from agon_env.agents import LLMAgent
    from agon_env.league.commands.league import LeagueArgs, play

    real, drafted = LLMAgent.act, []

    def counted(self, observations, **kw):
        drafted.extend((self.adapter, o["text"]) for o in observations if not o["draft"])  # reads no draft
        return real(self, observations, **kw)

    monkeypatch.setattr(LLMAgent, "act", counted)
    league = play([("agon-tiny", tiny_run)], LeagueArgs(problems=3, quiet=True), tmp_path)
    assert len(league.pairings) == 12  # 4 players: each drafts for 3 rivals
    assert len(drafted) == len(set(drafted)) == 4 * 3


def test_agon_league_writes_a_league_that_verifies_and_a_killed_one_writes_the_same(
    tiny_run, tmp_path, monkeypatch
):
    from agon_env.cli import main
    from agon_env.league.play import Arena

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    flags = ["--problems", "3", "--quiet"]
    assert main(["league", str(tiny_run), *flags, "--out", str(whole)]) == 0
    assert main(["league", "verify", str(whole / "league.json")]) == 0
    real, calls = Arena.play, []

    def interrupted_after_four(self, d, c):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(self, d, c)

    monkeypatch.setattr(Arena, "play", interrupted_after_four)
    with pytest.raises(KeyboardInterrupt):
        main(["league", str(tiny_run), *flags, "--out", str(killed)])
    monkeypatch.setattr(Arena, "play", real)
    assert main(["league", str(tiny_run), *flags, "--out", str(killed)]) == 0
    one, two = (json.loads((f / "league.json").read_text()) for f in (whole, killed))
    assert one["figures"] == two["figures"] and len(one["figures"]["pairings"]) == 12


def test_agon_league_refuses_a_folder_that_is_no_run_in_one_line(tmp_path, capsys):
    from agon_env.cli import main

    assert main(["league", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agon league:") and err.count("\n") == 1


def test_agon_study_league_plays_the_units_runs_across_arms(tiny_run, tmp_path):
    import shutil

    from agon_env.cli import main
    from agon_env.league.play import PAIRINGS

    study = tmp_path / "study"
    for unit in ("agon-seed0", "grpo-seed0"):  # two arms' units of one base
        shutil.copytree(tiny_run, study / "runs" / unit)
    assert main(["study", "league", str(study), "--problems", "2", "--pairs", "4", "--quiet"]) == 0
    header = json.loads((study / "league" / PAIRINGS).read_text().splitlines()[0])
    assert {p.split(":")[0] for p in header["league"]["players"]} == {"agon-seed0", "grpo-seed0"}
    assert len(header["league"]["players"]) == 8
    assert len(json.loads((study / "league" / "league.json").read_text())["figures"]["pairings"]) == 4


def test_training_seats_follow_the_runs_algorithm(tiny_run, tmp_path):
    import shutil

    from agon_env.league.players import league_contenders, training_seats

    fixed = tmp_path / "fixed"
    shutil.copytree(tiny_run, fixed)
    text = (fixed / "config.yaml").read_text().replace("algo: agon", "algo: fixed-roles")
    (fixed / "config.yaml").write_text(text)
    (fixed / "resolved.yaml").write_text(
        (fixed / "resolved.yaml").read_text().replace("algo: agon", "algo: fixed-roles")
    )
    seats = training_seats(league_contenders([("agon", tiny_run), ("fixed", fixed)]))
    # agon alternates the roles: each adapter trains in both; fixed-roles keeps agent_a drafting.
    assert seats == {
        "agon:agent_a": "both",
        "agon:agent_b": "both",
        "fixed:agent_a": "drafter",
        "fixed:agent_b": "challenger",
    }
