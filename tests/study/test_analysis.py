"""``benchmarks/replicate_cpu.py --quick`` end to end, and the report's arithmetic by hand.

The end-to-end test runs the tiny random model at the smallest sizes so every unit executes
(the numbers are meaningless; the pipeline, the resumption and the data file are tested).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCH / "replicate_cpu.py"
sys.path.insert(0, str(BENCH))
import replication_report as rr  # noqa: E402  (a script's sibling, not a package)
import replication_tables as rt  # noqa: E402


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_quick_replication_writes_results_that_recompute(tmp_path: Path) -> None:
    out, results, docs = tmp_path / "rep", tmp_path / "replication_cpu.json", tmp_path / "bench.md"
    docs.write_text(f"# Benchmarks\n\nbefore\n{rt.BEGIN}\nold table\n{rt.END}\nafter\n")
    cmd = [sys.executable, str(SCRIPT), "--quick", "--model", "tiny", "--difficulty", "1",
           "--calibration-problems", "4", "--test-problems", "5", "--val-problems", "2",
           "--max-new-tokens", "8", "--workers", "2", "--out", str(out),
           "--results", str(results), "--docs", str(docs)]  # fmt: skip
    proc = _run(cmd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    doc = json.loads(results.read_text())
    assert doc["complete"] and doc["task"] == {"env": "agon/arith-v0", "difficulty": 1}
    ids = doc["problems"]["test"]["ids"]
    assert len(ids) == 5 and len(doc["problems"]["test"]["prompt_sha256"]) == 5
    assert doc["problems"]["test_prompts_in_training_pool"] == 0
    arms = doc["outcomes"]["arms"]
    assert set(arms) == {"grpo", "coop", "agon"}
    assert set(arms["grpo"]["0"]["outcomes"]) == {"standalone:agent_a", "self-cascade:agent_a"}
    assert {"cascade:agent_a>agent_b", "cascade:agent_b>agent_a"} <= set(arms["agon"]["0"]["outcomes"])
    for arm in arms.values():
        for run in arm.values():
            assert all(len(o) == 5 and set(o) <= {0, 1} for o in run["outcomes"].values())
    # The summary is a function of the outcome lists alone.
    assert rr.summary_from_outcomes(doc) == doc["summary"]
    grpo = doc["summary"]["arms"]["grpo"]["standalone:agent_a"]
    assert grpo["per_seed"]["0"] == statistics.fmean(arms["grpo"]["0"]["outcomes"]["standalone:agent_a"])
    page = docs.read_text()
    assert "old table" not in page and page.startswith("# Benchmarks\n\nbefore\n")
    assert page.endswith("after\n")
    assert "| agon | cascade, direction chosen on validation |" in page and "agon − grpo" in page
    assert (tmp_path / rt.FIGURE).stat().st_size > 0

    # Re-running the same command redoes nothing; other settings in the same folder are refused.
    again = _run(cmd)
    assert again.returncode == 0 and "agon train" not in again.stdout and "agon eval" not in again.stdout
    other = _run([*cmd, "--steps", "3"])
    assert other.returncode != 0 and "holds a replication with other steps" in other.stderr
    # A report without the settings flags reports on what ran (plan.json), not on the defaults.
    report = _run([sys.executable, str(SCRIPT), "--report-only", "--out", str(out),
                   "--results", str(results)])  # fmt: skip
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    assert json.loads(results.read_text())["outcomes"] == doc["outcomes"]
    # The results file is the durable record: with the run folders lost, no unit is redone.
    shutil.rmtree(out)
    lost = _run(cmd)
    assert lost.returncode == 0, lost.stdout[-3000:] + lost.stderr[-3000:]
    assert not any(x in lost.stdout for x in ("agon train", "eval-agon", "eval-base"))
    assert json.loads(results.read_text())["outcomes"] == doc["outcomes"]


def test_a_unit_stays_locked_while_its_replicator_or_an_orphaned_child_lives(tmp_path: Path) -> None:
    import replicate_cpu as rc

    folder = tmp_path / "locks" / "agon-seed0"
    lock = rc.Lock(folder)
    with lock as mine:
        assert mine and (folder / ".lock").read_text() == str(os.getpid())
        with rc.Lock(folder) as second:
            assert not second  # a second replicator leaves the unit alone
        # What Runner.agon does: the trainer inherits the lock.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(lock.fd,))
    try:
        with rc.Lock(folder) as after_parent:
            assert not after_parent  # the replicator is gone, its trainer still runs this unit
    finally:
        child.kill()
        child.wait()
    with rc.Lock(folder) as free:
        assert free  # nobody holds it any more: no stale lock to clean up by hand


def test_a_run_is_trained_once_its_last_step_and_its_adapters_are_written(tmp_path: Path) -> None:
    import replicate_cpu as rc

    (tmp_path / "metrics.jsonl").write_text('{"step": 0}\n{"step": 1}\n')
    assert not rc.trained(tmp_path, 2)  # no curves.png: killed while saving its adapters
    (tmp_path / "curves.png").write_bytes(b"png")
    assert rc.trained(tmp_path, 2) and not rc.trained(tmp_path, 3)


def test_an_evaluation_of_another_level_is_refused(tmp_path: Path) -> None:
    import replicate_cpu as rc

    plan = rc.Plan(test_problems=5, val_problems=2)
    data = {"env": "agon/arith-v0", "task_kwargs": {"difficulty": 2.5}, "split": "test",
            "test_problems": 5, "validation_problems": 2}  # fmt: skip
    rr.check_eval({"data": data}, plan, 2.5, tmp_path)
    with pytest.raises(SystemExit, match="difficulty"):
        rr.check_eval({"data": data}, plan, 3, tmp_path)
    with pytest.raises(SystemExit, match="test_problems"):
        rr.check_eval({"data": data | {"test_problems": 6}}, plan, 2.5, tmp_path)


def _run_record(outcomes: dict[str, list[int]], chosen: str | None) -> dict:
    firsts = {k: [1, 1, 0, 0] for k in outcomes if ">" in k or "self" in k}  # drafts: first two right
    lengths = {k: 10.0 * (1 + (">" in k)) for k in outcomes}
    return {"outcomes": outcomes, "first_outcomes": firsts, "mean_length": lengths,
            "chosen_cascade": chosen, "post_hoc_differs": False}  # fmt: skip


def test_summary_by_hand() -> None:
    doc = {
        "outcomes": {
            "base": {"outcomes": {"base-few-shot": [0, 0, 1, 0]}, "mean_length": {"base-few-shot": 9.0}},
            "arms": {
                "grpo": {"0": _run_record({"standalone:agent_a": [1, 0, 1, 0],
                                          "self-cascade:agent_a": [1, 1, 0, 0]}, None)},
                "agon": {"0": _run_record({"standalone:agent_a": [1, 1, 1, 0],
                                          "standalone:agent_b": [1, 0, 1, 0],
                                          "cascade:agent_a>agent_b": [0, 0, 0, 0],
                                          "cascade:agent_b>agent_a": [1, 1, 1, 1]},
                                         "cascade:agent_b>agent_a")},
            },
        }
    }  # fmt: skip
    s = rr.summary_from_outcomes(doc)
    agon = s["arms"]["agon"]
    # Standalone = the two adapters' mean per problem: [1, .5, 1, 0] -> 0.625.
    assert agon["standalone"]["mean"] == 0.625 and agon["standalone"]["per_seed"] == {"0": 0.625}
    # Two-stage = the direction validation chose (b drafts, a answers), never the better on test.
    assert agon["two-stage"]["mean"] == 1.0 and agon["two-stage"]["mean_length"] == 20.0
    assert s["arms"]["grpo"]["two-stage"]["mean"] == 0.5  # grpo's two-stage is its self-cascade
    paired = s["paired"]
    assert paired["agon − grpo, standalone"]["mean"] == pytest.approx(0.125)
    assert paired["agon − grpo, two-stage"]["mean"] == 0.5
    assert "agon − coop, standalone" not in paired  # no coop arm here: nothing to pair with
    assert s["base"]["base-few-shot"]["mean"] == 0.25
    # The second turn: grpo's self-cascade [1, 1, 0, 0] on drafts [1, 1, 0, 0] keeps 2/2, fixes 0/2;
    # agon's chosen cascade [1, 1, 1, 1] keeps 2/2 and fixes 2/2.
    assert s["second_turn"]["grpo"] == {"right_drafts": 2, "kept": 2, "wrong_drafts": 2, "fixed": 0}
    assert s["second_turn"]["agon"] == {"right_drafts": 2, "kept": 2, "wrong_drafts": 2, "fixed": 2}
    lo, hi = agon["two-stage"]["interval"]
    assert lo == hi == 1.0  # every resample of an all-correct list is all correct
    # One seed: its difference, and no interval over seeds.
    assert paired["agon − grpo, standalone"]["per_seed"] == {"0": pytest.approx(0.125)}
    assert paired["agon − grpo, standalone"]["t_interval_over_seeds"] is None
    # agon's adapters a = [1, 1, 1, 0], b = [1, 0, 1, 0]: both wrong on problem 4, exactly one on
    # problem 2; independent adapters with those accuracies share 4 × 0.25 × 0.5 = 0.5 errors.
    assert s["alike"] == {"agon": {"problems": 4, "both_wrong": 1, "both_wrong_if_independent": 0.5,
                                   "exactly_one_wrong": 1}}  # fmt: skip
    assert s["seeds"] == ["0"] and s["left_out"] == []


def test_tables_compare_only_the_seeds_every_arm_finished() -> None:
    from scipy.stats import t

    def solo(standalone: list[int], self_cascade: list[int]) -> dict:
        return _run_record({"standalone:agent_a": standalone, "self-cascade:agent_a": self_cascade}, None)

    def pair(a: list[int], b: list[int]) -> dict:
        o = {"standalone:agent_a": a, "standalone:agent_b": b, "cascade:agent_a>agent_b": a}
        return _run_record(o, "cascade:agent_a>agent_b")

    grpo = {"0": solo([1, 0, 1, 0], [1, 1, 0, 0]), "1": solo([1, 1, 0, 0], [0, 0, 0, 0]),
            "2": solo([1, 1, 1, 1], [1, 1, 1, 1])}  # fmt: skip
    agon = {"0": pair([1, 1, 1, 0], [1, 0, 1, 0]), "1": pair([1, 1, 1, 1], [1, 1, 1, 1])}
    s = rr.summary_from_outcomes({"outcomes": {"base": None, "arms": {"grpo": grpo, "agon": agon}}})
    assert s["seeds"] == ["0", "1"] and s["left_out"] == ["grpo-seed2"]
    assert s["arms"]["grpo"]["standalone"]["per_seed"] == {"0": 0.5, "1": 0.5}  # not seed 2's 1.0
    d = s["paired"]["agon − grpo, standalone"]
    # Seed 0: 0.625 − 0.5; seed 1: 1.0 − 0.5. Over two seeds: mean 0.3125, s/√n = 0.375/√2/√2.
    assert d["per_seed"] == {"0": pytest.approx(0.125), "1": pytest.approx(0.5)}
    assert d["seeds_used"] == ["0", "1"]
    half = t.ppf(0.975, 1) * 0.1875
    assert d["t_interval_over_seeds"] == pytest.approx([0.3125 - half, 0.3125 + half])
    assert d["mean"] == pytest.approx(0.3125)


RESULTS = BENCH.parent / "docs" / "results" / "replication_cpu.json"


STUDY_2 = BENCH.parent / "docs" / "results" / "study_2.json"
RECORDED_STUDIES = [
    # (results file, its least test and validation problems once complete, the arms with >= 3 seeds)
    pytest.param(RESULTS, 200, 50, ("grpo", "coop", "agon"), id="replication"),
    pytest.param(STUDY_2, 300, 150, ("grpo", "coop", "agon", "agon-redacted"), id="study-2"),
]


@pytest.mark.parametrize(("results", "least_test", "least_val", "arms"), RECORDED_STUDIES)
def test_the_recorded_replication_recomputes_and_its_test_problems_are_held_out(
    results: Path, least_test: int, least_val: int, arms: tuple[str, ...]
) -> None:
    from agon_env.evaluation.splits import load_eval_data

    if not results.is_file():
        pytest.skip(f"no {results.name} recorded yet")
    doc = json.loads(results.read_text())
    assert rr.summary_from_outcomes(doc) == doc["summary"]
    probs, plan = doc["problems"], doc["plan"]
    data = load_eval_data("agon/arith-v0", {"difficulty": doc["task"]["difficulty"]}, "test",
                          plan["test_problems"], plan["val_problems"], seed=0)  # fmt: skip
    assert probs["test"]["ids"] == data.test.ids() and probs["validation"]["ids"] == data.validation.ids()
    assert probs["test"]["prompt_sha256"] == [rr.sha(data.test.task[i].prompt) for i in data.test.indices]
    assert probs["test_prompts_in_training_pool"] == 0 and probs["test_prompts_in_validation"] == 0
    n = len(probs["test"]["ids"])
    for arm in doc["outcomes"]["arms"].values():
        for run in arm.values():
            assert all(len(o) == n for o in run["outcomes"].values())
    if doc["complete"]:
        assert n >= least_test and len(probs["validation"]["ids"]) >= least_val
        assert all(len(doc["outcomes"]["arms"][a]) >= 3 for a in arms)


def test_alike_adds_the_adapters_answer_differences_only_when_every_run_recorded_them() -> None:
    a, b = [1, 1, 1, 0], [1, 0, 1, 0]

    def run(differ: dict | None) -> dict:
        r = _run_record({"standalone:agent_a": a, "standalone:agent_b": b}, None)
        return r if differ is None else r | {"answers_differ": differ}

    two = [run({"differ": 1, "both_answered": 4}), run({"differ": 3, "both_answered": 3})]
    assert rr.alike(two)["answers_differ"] == {"differ": 4, "both_answered": 7}
    assert "answers_differ" not in rr.alike([two[0], run(None)])  # a run evaluated before #22


def test_the_training_table_reads_the_renamed_metric_and_flags_the_legacy_one() -> None:
    new, old = {"training": {rr.CHANGED: {"all": 0.4}}}, {"training": {rr.LEGACY_CHANGED: {"all": 0.7}}}
    assert rt.changed_key([new, old]) == rr.CHANGED and rt.changed_key([old]) == rr.LEGACY_CHANGED
    doc = json.loads(RESULTS.read_text()) if RESULTS.is_file() else None
    if doc is not None:  # the recorded replication predates the rename: its column is flagged
        table = rt.markdown(doc)
        assert "challenge changed answer (%) †" in table and "KL(drafter‖challenger)" in table


@pytest.mark.skipif(not RESULTS.is_file(), reason="no recorded replication yet")
def test_a_results_file_with_the_old_method_names_reads_as_today(tmp_path: Path) -> None:
    """Files up to 35d8054 call the few-shot base ``zero-shot``; read, it is ``base-few-shot``
    and its table row says it saw the worked examples."""
    doc = json.loads(RESULTS.read_text())
    base = doc["outcomes"]["base"]
    for key in ("outcomes", "mean_length"):  # as the file was written before the rename
        base[key] = {("zero-shot" if k == "base-few-shot" else k): v for k, v in base[key].items()}
    old = tmp_path / "replication_cpu.json"
    old.write_text(json.dumps(doc))
    read = rr.recorded(old)
    assert "zero-shot" not in read["outcomes"]["base"]["outcomes"]
    assert read["outcomes"]["base"]["outcomes"]["base-few-shot"] == base["outcomes"]["zero-shot"]
    read["summary"] = rr.summary_from_outcomes(read)
    assert "| untrained base | few-shot (worked examples) |" in rt.markdown(read)


def test_a_replication_recorded_under_other_prompts_is_not_resumed() -> None:
    import replicate_cpu as rc

    now = {"model": "m", "prompts": rc.prompts_fingerprint()}
    assert rc.other_settings({"model": "m"}, now) == ["prompts"]  # recorded before #22: the old prompts
    assert rc.other_settings(dict(now), now) == []
    assert rc.other_settings({"model": "m", "prompts": "0" * 16}, now) == ["prompts"]


def test_a_plan_trains_with_train_config_overrides_and_reads_the_records_before_them() -> None:
    import replicate_cpu as rc

    from agon_env.config import TrainConfig

    plan = rc.Plan()
    cfg, default = plan.config(), TrainConfig()
    assert (cfg.steps, cfg.batch_problems, cfg.grpo.micro_batch_tokens) == (60, 4, 2048)
    assert cfg.sampling == default.sampling and cfg.optim == default.optim  # not restated: the default run's
    assert rc.Plan.from_record(plan.record()) == plan
    # A plan.json (and a results file's plan) as written before the overrides: flat settings.
    legacy = {"model": "smollm2-135m", "difficulty": None, "candidates": [2.5, 3, 2],
              "calibration_problems": 100, "arms": ["grpo", "coop", "agon"], "seeds": [0, 1, 2],
              "steps": 60, "batch_problems": 4,
              "num_generations": 4, "max_new_tokens": 80, "temperature": 0.7, "lr": 0.0002, "threads": 1,
              "micro_batch_tokens": 2048, "test_problems": 200, "val_problems": 50, "eval_seeds": [0],
              "prompts": ""}  # fmt: skip
    assert rc.other_settings(legacy, plan.record()) == []  # resumes: the same training
    assert {k: v for k, v in plan.record().items() if k in legacy} == legacy  # the same keys, read alike
    old = rc.Plan.from_record(legacy)
    assert old.config() == cfg and old.record()["steps"] == 60
    beta = rc.Plan(train={**rc.Plan().train, "grpo.beta": 0.04})
    assert rc.other_settings(plan.record(), beta.record()) == ["train"]
    shorter = rc.Plan(train={**rc.Plan().train, "steps": 3})
    assert rc.other_settings(plan.record(), shorter.record()) == ["steps"]


def test_the_study_plan_runs_the_redacted_arm_as_agon_with_the_redacted_exchange(tmp_path: Path) -> None:
    """``--plan study-2``: its arms and counts, and what each unit hands to ``agon train``/``eval``."""
    import replicate_cpu as rc

    args = rc.parser().parse_args(["--plan", "study-2", "--seeds", "0", "1", "2", "3"])
    plan = rc.build_plan(args)
    assert plan.arms == ["grpo", "coop", "agon", "agon-redacted"] and plan.seeds == [0, 1, 2, 3]
    assert plan.test_problems >= 300 and plan.val_problems >= 150 and plan.difficulty == 2.5
    assert {rr.two_stage(a) for a in plan.arms} == {"self-cascade", "cascade"}
    assert ("agon-redacted", "agon") in rr.PAIRS

    calls: list[tuple[str, list[str]]] = []

    class Recorder:
        out = tmp_path

        def agon(self, name: str, argv: list[str], hold: object = None) -> None:
            calls.append((name, argv))

    for arm in ("agon-redacted", "grpo"):
        rc.run_unit(plan, Recorder(), 2.5, arm, 0, set())  # type: ignore[arg-type]
    (_, train), (_, evaluate), (_, grpo_train), (_, grpo_eval) = calls
    at = train.index("--env.kwargs")
    assert train[train.index("--algo") + 1] == "agon" and "--env.redact-answer" in train
    assert train[at + 1] == "difficulty=2.5" and train[at + 2].startswith("--")
    assert "self-cascade" not in evaluate and str(tmp_path / "runs" / "agon-redacted-seed0") in evaluate
    assert "--env.redact-answer" not in grpo_train and "self-cascade" in grpo_eval


def test_the_exchange_plan_trains_each_channel_and_evaluates_each_run_on_its_own(tmp_path: Path) -> None:
    """``--plan exchange-3`` (issue #25): one agon arm per channel, paired against text summaries."""
    import replicate_cpu as rc

    plan = rc.build_plan(rc.parser().parse_args(["--plan", "exchange-3"]))
    assert plan.arms == ["agon", "agon-latent", "agon-none"] and plan.seeds == [0, 1, 2]
    assert {("agon-latent", "agon"), ("agon-none", "agon")} <= set(rr.PAIRS)
    calls: list[list[str]] = []

    class Recorder:
        out = tmp_path

        def agon(self, name: str, argv: list[str], hold: object = None) -> None:
            calls.append(argv)

    for arm in plan.arms:
        rc.run_unit(plan, Recorder(), 2.5, arm, 0, set())  # type: ignore[arg-type]
    trains = calls[0::2]
    channels = [t[t.index("--env.exchange") + 1] if "--env.exchange" in t else None for t in trains]
    assert channels == [None, "latent", "none"]  # agon: the default channel, summary
    assert all(t[t.index("--steps") + 1] == "15" for t in trains)
    assert all("cascade" in e and "self-cascade" not in e for e in calls[1::2])


def test_the_checkable_families_leave_the_recorded_fingerprint_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor does a family some other code registers in this process (the prompt-family tests do)."""
    import replicate_cpu as rc

    from agon_env.agents.prompts import PROMPT_FAMILIES, RolePrompts

    monkeypatch.setitem(PROMPT_FAMILIES, "fingerprint-test", RolePrompts(drafter_system="Solve."))
    recorded = json.loads((BENCH.parent / "docs" / "results" / "replication_cpu_v2.json").read_text())
    assert rc.prompts_fingerprint() == recorded["plan"]["prompts"]


def test_a_plan_on_another_task_trains_evaluates_and_records_that_task(tmp_path: Path) -> None:
    """Off ``agon/arith-v0`` there is no level: every unit gets the plan's env and task keywords."""
    import replicate_cpu as rc

    train = {**rc.Plan().train, "env.id": "agon/divides-v0", "env.kwargs": {"options": 3}}
    plan = rc.Plan(train=train, test_problems=6, val_problems=3)
    assert plan.task(None) == {"options": 3} and rc.Plan().task(2.5) == {"difficulty": 2.5}
    assert plan.task(2.5) == {"options": 3}  # a level is agon/arith-v0's keyword alone
    calls: list[list[str]] = []

    class Recorder:
        out = tmp_path

        def agon(self, name: str, argv: list[str], hold: object = None) -> None:
            calls.append(argv)

    rc.run_unit(plan, Recorder(), None, "agon-redacted", 0, set())  # type: ignore[arg-type]
    rc.base_unit(plan, Recorder(), None, set())  # type: ignore[arg-type]
    train, _, base = calls
    at = train.index("--env.kwargs")
    assert train[train.index("--env.id") + 1] == "agon/divides-v0"
    assert train[at + 1] == "options=3" and "--env.redact-answer" in train
    assert base[base.index("--env") + 1 : base.index("--env") + 4] == [
        "agon/divides-v0",
        "--env-kwarg",
        "options=3",
    ]
    probs = rr.problems(plan, None)
    assert len(probs["test"]["ids"]) == 6 and probs["test_prompts_in_training_pool"] == 0
    assert rr.task_record(plan, None) == {
        "env": "agon/divides-v0",
        "difficulty": None,
        "kwargs": {"options": 3},
    }
    assert rt.task_label(rr.task_record(plan, None)) == "`agon/divides-v0` options=3"
    assert rt.task_label({"env": "agon/arith-v0", "difficulty": 2.5}) == "`agon/arith-v0` level 2.5"


def test_a_subset_of_units_grows_the_recorded_plan_never_shrinks_it(tmp_path: Path) -> None:
    """``--arms grpo --seeds 2`` (what fits a sitting) keeps the folder's other arms and seeds in
    plan.json, which ``--report-only`` and the end-of-run report read."""
    import replicate_cpu as rc
    from replication_plans import Plan

    rc.check_resumable(Plan(arms=["grpo", "coop", "agon"], seeds=[0, 1]), tmp_path)
    rc.check_resumable(Plan(arms=["grpo", "agon-redacted"], seeds=[2]), tmp_path)
    recorded = json.loads((tmp_path / "plan.json").read_text())
    assert recorded["arms"] == ["grpo", "coop", "agon", "agon-redacted"] and recorded["seeds"] == [0, 1, 2]
    with pytest.raises(SystemExit, match="other steps"):
        rc.check_resumable(Plan(train={"steps": 3}), tmp_path)


@pytest.mark.parametrize(
    ("low", "high", "per_seed", "expected"),
    [
        (0.01, 0.05, [0.02, 0.03, 0.01], "agon better"),
        (0.01, 0.05, [0.02, 0.03, -0.01], "no difference shown"),  # one seed disagrees
        (-0.01, 0.05, [0.02, 0.03, 0.01], "no difference shown"),  # the interval reaches 0
        (-0.05, -0.01, [-0.02, -0.03, -0.01], "agon worse"),
        (-0.05, -0.01, [-0.02, 0.0, -0.01], "no difference shown"),  # a tie is no agreement
        (0.01, 0.05, [], "no difference shown"),
    ],
)
def test_the_pre_registered_decision_rule(low, high, per_seed, expected) -> None:
    diff = {"low": low, "high": high, "per_seed": {str(i): v for i, v in enumerate(per_seed)}}
    assert rr.verdict(diff, "agon") == expected


def test_the_second_turns_net_effect_by_hand() -> None:
    # Keeps 1 of 2 right drafts and fixes 2 of 2 wrong ones: +2 - 1 over 4 drafts.
    assert rr.second_turn_net({"right_drafts": 2, "kept": 1, "wrong_drafts": 2, "fixed": 2}) == 0.25
    assert rr.second_turn_net({"right_drafts": 2, "kept": 2, "wrong_drafts": 2, "fixed": 0}) == 0.0
    assert rr.second_turn_net({"right_drafts": 3, "kept": 0, "wrong_drafts": 0, "fixed": 0}) == -1.0


def test_the_second_turns_interval_is_paired_on_its_own_drafts() -> None:
    # Two seeds of 4 problems: seed 0 keeps 1 of 2 right drafts and fixes 2 of 2 wrong ones
    # (+0.25), seed 1 changes nothing (0): pooled net +0.125, and the interval's mean is that net.
    runs = [
        {"outcomes": {"c": [1, 0, 1, 1]}, "first_outcomes": {"c": [1, 1, 0, 0]}},
        {"outcomes": {"c": [1, 0, 0, 1]}, "first_outcomes": {"c": [1, 0, 0, 1]}},
    ]
    turn = rr.second_turn(runs, lambda r: ["c"])
    assert turn == {"right_drafts": 4, "kept": 3, "wrong_drafts": 4, "fixed": 2}
    iv = rr.second_turn_change(runs, lambda r: ["c"])
    assert iv.mean == pytest.approx(rr.second_turn_net(turn)) == pytest.approx(0.125)
    assert iv.low <= 0.125 <= iv.high and iv.low < iv.high
    unchanged = rr.second_turn_change(runs[1:], lambda r: ["c"])
    assert (unchanged.mean, unchanged.low, unchanged.high) == (0.0, 0.0, 0.0)
    assert rr.second_turn_change([{"outcomes": {"c": [1]}}], lambda r: ["c"]) is None  # no drafts recorded
