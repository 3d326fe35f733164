"""agon probe: hand-computed rates, gap and break-even; the replay into the env; the verdicts."""

from __future__ import annotations

import pytest

from agon_env.agents.scripted import ScriptedAgent
from agon_env.envs.draft_challenge import DraftChallengeEnv
from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.evaluation.probe import ProbeOutcome, analyse, fix_needed, run_probe


def _o(pid: str, draft: bool, reader: bool, changed: bool = True) -> ProbeOutcome:
    return ProbeOutcome(pid, draft, reader, changed, leak=False)


def test_rates_gap_and_break_even_by_hand() -> None:
    # p1: two right drafts, one kept; p2: two wrong drafts, one fixed.
    r = analyse(
        [_o("p1", True, True, False), _o("p1", True, False), _o("p2", False, True), _o("p2", False, False)]
    )
    assert r["solve"]["rate"] == 0.5 and r["keep"]["rate"] == 0.5 and r["fix"]["rate"] == 0.5
    assert r["two_stage"] == 0.5 and r["gap"]["mean"] == 0.0
    assert r["fix_needed_at_keep"] == pytest.approx(0.5)  # p(1 − keep) / (1 − p) = .5·.5/.5
    assert r["keep_needed_at_fix"] == pytest.approx(0.5)  # 1 − (1 − p)·fix / p
    assert r["balanced_verify"] == 0.5
    assert r["verdict"].startswith("cannot tell from 2 problems")


def test_a_reader_that_fixes_without_breaking_can_help() -> None:
    # p1: drafts right, wrong -> reader right on both; p2: wrong, wrong -> reader wrong, right.
    r = analyse([_o("p1", True, True), _o("p1", False, True), _o("p2", False, False), _o("p2", False, True)])
    assert (
        r["solve"]["rate"] == 0.25 and r["keep"]["rate"] == 1.0 and r["fix"]["rate"] == pytest.approx(2 / 3)
    )
    assert r["two_stage"] == 0.75
    # Per-problem differences are +0.5 and +0.5, so every bootstrap replicate is +0.5.
    assert (r["gap"]["mean"], r["gap"]["low"], r["gap"]["high"]) == pytest.approx((0.5, 0.5, 0.5))
    assert r["fix_needed_at_keep"] == 0.0
    assert r["verdict"].startswith("a rival can help here")


def test_a_reader_that_breaks_right_drafts_cannot() -> None:
    r = analyse([_o(f"p{i}", True, False) for i in range(5)] + [_o(f"q{i}", False, False) for i in range(5)])
    assert r["gap"]["high"] < 0 and r["verdict"].startswith("it cannot")
    assert "would have to fix 100 %" in r["verdict"]  # p(1 − 0)/(1 − p) with p = 0.5


class _Say(ListTask):
    name = "say"

    def score(self, problem: Problem, answer: str) -> bool:
        return answer.strip() == problem.answer


def _answer(n: str) -> str:
    return f"Thinking.\n<summary>Read the number off.</summary>\n<answer>{n}</answer>"


def test_run_probe_replays_each_draft_to_the_reader_through_the_env() -> None:
    task = _Say([Problem(f"p{n}", f"Say {n}.", str(n)) for n in range(4)])
    # The drafter is right on even numbers only; the reader always re-derives the right one.
    drafter = ScriptedAgent("d", lambda o: _answer(o["problem"][4] if int(o["problem"][4]) % 2 == 0 else "x"))
    seen: list[dict] = []

    def read(obs: dict) -> str:
        seen.append(dict(obs))
        return _answer(obs["problem"][4])

    outcomes = run_probe(
        DraftChallengeEnv(task, mode="solo"),
        DraftChallengeEnv(task, mode="challenge"),
        drafter,
        ScriptedAgent("r", read),
        problem_indices=[0, 1, 2, 3],
        samples=2,
    )
    assert len(outcomes) == 8 and [o.problem_id for o in outcomes[:2]] == ["p0", "p0"]
    assert [o.draft_correct for o in outcomes] == [True, True, False, False] * 2
    assert all(o.reader_correct for o in outcomes)
    assert [o.reader_changed for o in outcomes] == [False, False, True, True] * 2
    # The reader read the challenger's turn: the draft's summary, never its answer block.
    assert all(o["role"] == 1 and o["draft"] == "Read the number off." for o in seen)
    r = analyse(outcomes)
    assert (r["solve"]["rate"], r["keep"]["rate"], r["fix"]["rate"], r["two_stage"]) == (0.5, 1.0, 1.0, 1.0)


def test_agon_probe_runs_on_the_tiny_model(tmp_path, capsys) -> None:
    import json

    from agon_env.cli import main

    out = tmp_path / "probe.json"
    args = ["probe", "--model", "tiny", "--env", "agon/arith-v0", "--problems", "4", "--out", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    assert result["problems"] == 4 and result["drafts"] == 16 and len(result["outcomes"]) == 16
    assert result["config"]["split"] == "validation"
    assert all(pid.startswith("validation-") for pid in result["problem_ids"])
    assert "verdict:" in capsys.readouterr().out


def test_agon_probe_help_shows_the_dataclass_defaults(capsys) -> None:
    from agon_env.cli import main

    assert main(["probe", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--samples INT" in text and "(default: 4)" in text and "--split STR" in text


def _run_folder(tmp_path, **env) -> str:
    import yaml

    from agon_env.config import EnvConfig, TrainConfig, to_dict

    folder = tmp_path / "run"
    folder.mkdir()
    cfg = to_dict(TrainConfig(env=EnvConfig(**env)))
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    return str(folder)


def test_a_run_is_probed_through_its_own_task_and_channel(tmp_path) -> None:
    from agon_env.evaluation.commands.probe import ProbeConfig, probe_env

    run = _run_folder(tmp_path, kwargs={"difficulty": 3}, exchange="redacted", lam=0.25, max_text_length=300)
    env_id, kwargs = probe_env(ProbeConfig(run=run))
    assert env_id == "agon/arith-v0" and kwargs["difficulty"] == 3 and kwargs["exchange"] == "redacted"
    assert kwargs["lam"] == 0.25 and kwargs["max_text_length"] == 300  # the run's env options, all of them
    # The command's keywords win; another env drops the run's task keywords, not its env options.
    _, given = probe_env(ProbeConfig(run=run, env_kwargs=["difficulty=2", "exchange=trace"]))
    assert (given["difficulty"], given["exchange"], given["lam"]) == (2, "trace", 0.25)
    env_id, other = probe_env(ProbeConfig(run=run, env="agon/math-v0"))
    assert env_id == "agon/math-v0" and "difficulty" not in other and other["exchange"] == "redacted"
    # The base: the default task, only what the command says.
    assert probe_env(ProbeConfig(env_kwargs=["difficulty=2.5"])) == ("agon/arith-v0", {"difficulty": 2.5})


def test_a_latent_run_is_refused_in_one_line_naming_the_way_out(tmp_path) -> None:
    from agon_env.evaluation.commands.probe import ProbeConfig, probe

    run = _run_folder(tmp_path, exchange="latent")
    with pytest.raises(ValueError, match="exchange=summary"):
        probe(ProbeConfig(run=run, out=str(tmp_path / "p.json")))


def test_the_break_even_fix_rate_by_hand() -> None:
    # Solve 0.75, keep 0.8: it breaks 0.75·0.2 = 0.15 of drafts, so it must fix 0.15/0.25 = 0.6 of wrong ones.
    assert fix_needed(0.75, 0.8) == pytest.approx(0.6)
    assert fix_needed(0.5, 1.0) == 0.0
    assert fix_needed(0.0, None) is None and fix_needed(1.0, 0.5) is None


def test_the_probe_counts_code_time_outs_apart_from_wrong_answers() -> None:
    # A draft over its time limit scores wrong, as before, and the probe's record says it was a
    # time-out; a wrong draft is a wrong draft.
    from agon_env.envs.tasks.mbpp import MBPPTask

    bundle = {"setup": "", "tests": ["assert f() == 1"], "reference": "def f():\n    return 1\n"}
    task = MBPPTask([Problem("f", "Write f.", bundle)])
    loop = "def f():\n    while True:\n        pass"
    drafter = ScriptedAgent("d", lambda o: _answer(loop))
    outcomes = run_probe(
        DraftChallengeEnv(task, mode="solo"),
        DraftChallengeEnv(task, mode="challenge"),
        drafter,
        ScriptedAgent("r", lambda o: _answer("def f():\n    return 2")),
        problem_indices=[0],
        samples=1,
    )
    (o,) = outcomes
    assert not o.draft_correct and o.draft_unjudged == "timeout" and o.reader_unjudged is None
    r = analyse(outcomes)
    assert (r["score_timeouts"], r["score_errors"]) == (1, 0)
    assert ProbeOutcome("p", True, True, False, False).draft_unjudged is None  # older files read as judged


def test_an_out_file_that_takes_no_bytes_is_refused_before_the_probe(capsys) -> None:
    from agon_env.cli import main

    # It was found only after the whole probe, which was then lost.
    assert main(["probe", "--model", "no/such-model", "--problems", "4", "--out", "/dev/full"]) == 2
    assert "--out /dev/full: cannot write it (No space left on device)" in capsys.readouterr().err
