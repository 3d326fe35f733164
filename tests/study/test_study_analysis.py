"""The study's analysis by hand: the summary, the decision rule, the second turn, the tables.

Every formula against hand-computed values on tiny outcome lists (no model, no files but the
recorded results for the tables' legacy wording).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agon_env.study import analysis as rr
from agon_env.study import tables as rt
from agon_env.study.results_file import read_results
from agon_env.upgrade import LEGACY_CHANGED

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "replication_cpu.json"


def _run_record(outcomes: dict[str, list[int]], chosen: str | None) -> dict:
    firsts = {k: [1, 1, 0, 0] for k in outcomes if ">" in k or "self" in k}  # drafts: first two right
    lengths = {k: 10.0 * (1 + (">" in k)) for k in outcomes}
    return {
        "outcomes": outcomes,
        "first_outcomes": firsts,
        "mean_length": lengths,
        "chosen_cascade": chosen,
        "post_hoc_differs": False,
    }


def test_summary_by_hand() -> None:
    doc = {
        "outcomes": {
            "base": {"outcomes": {"base-few-shot": [0, 0, 1, 0]}, "mean_length": {"base-few-shot": 9.0}},
            "arms": {
                "grpo": {
                    "0": _run_record(
                        {"standalone:agent_a": [1, 0, 1, 0], "self-cascade:agent_a": [1, 1, 0, 0]}, None
                    )
                },
                "agon": {
                    "0": _run_record(
                        {
                            "standalone:agent_a": [1, 1, 1, 0],
                            "standalone:agent_b": [1, 0, 1, 0],
                            "cascade:agent_a>agent_b": [0, 0, 0, 0],
                            "cascade:agent_b>agent_a": [1, 1, 1, 1],
                        },
                        "cascade:agent_b>agent_a",
                    )
                },
            },
        }
    }
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
    assert s["alike"] == {
        "agon": {"problems": 4, "both_wrong": 1, "both_wrong_if_independent": 0.5, "exactly_one_wrong": 1}
    }
    assert s["seeds"] == ["0"] and s["left_out"] == []


def test_tables_compare_only_the_seeds_every_arm_finished() -> None:
    from scipy.stats import t

    def solo(standalone: list[int], self_cascade: list[int]) -> dict:
        return _run_record({"standalone:agent_a": standalone, "self-cascade:agent_a": self_cascade}, None)

    def pair(a: list[int], b: list[int]) -> dict:
        o = {"standalone:agent_a": a, "standalone:agent_b": b, "cascade:agent_a>agent_b": a}
        return _run_record(o, "cascade:agent_a>agent_b")

    grpo = {
        "0": solo([1, 0, 1, 0], [1, 1, 0, 0]),
        "1": solo([1, 1, 0, 0], [0, 0, 0, 0]),
        "2": solo([1, 1, 1, 1], [1, 1, 1, 1]),
    }
    agon = {"0": pair([1, 1, 1, 0], [1, 0, 1, 0]), "1": pair([1, 1, 1, 1], [1, 1, 1, 1])}
    s = rr.summary_from_outcomes({"outcomes": {"base": None, "arms": {"grpo": grpo, "agon": agon}}})
    assert s["seeds"] == ["0", "1"] and s["left_out"] == ["grpo-seed2"]
    assert s["arms"]["grpo"]["standalone"]["per_seed"] == {"0": 0.5, "1": 0.5}  # not seed 2's 1.0
    d = s["paired"]["agon − grpo, standalone"]
    # Seed 0: 0.625 − 0.5; seed 1: 1.0 − 0.5. Over two seeds: mean 0.3125, s/√n = 0.375/√2/√2.
    assert d["per_seed"] == {"0": pytest.approx(0.125), "1": pytest.approx(0.5)}
    assert d["seeds_used"] == ["0", "1"]
    half = t.ppf(0.975, 1) * 0.1875  # 2.38: one degree of freedom, t = 12.71
    assert 0.3125 - half < -1 and 0.3125 + half > 1
    assert d["t_interval_over_seeds"] == [-1.0, 1.0]  # clipped into a difference's range
    assert d["mean"] == pytest.approx(0.3125)


def test_alike_adds_the_adapters_answer_differences_only_when_every_run_recorded_them() -> None:
    a, b = [1, 1, 1, 0], [1, 0, 1, 0]

    def run(differ: dict | None) -> dict:
        r = _run_record({"standalone:agent_a": a, "standalone:agent_b": b}, None)
        return r if differ is None else r | {"answers_differ": differ}

    two = [run({"differ": 1, "both_answered": 4}), run({"differ": 3, "both_answered": 3})]
    assert rr.alike(two)["answers_differ"] == {"differ": 4, "both_answered": 7}
    assert "answers_differ" not in rr.alike([two[0], run(None)])  # a run evaluated before #22


def test_the_training_table_reads_the_renamed_metric_and_flags_the_legacy_one() -> None:
    new, old = {"training": {rr.CHANGED: {"all": 0.4}}}, {"training": {LEGACY_CHANGED: {"all": 0.7}}}
    assert rt.changed_key([new, old]) == rr.CHANGED and rt.changed_key([old]) == LEGACY_CHANGED
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
    read = read_results(old).document
    assert "zero-shot" not in read["outcomes"]["base"]["outcomes"]
    assert read["outcomes"]["base"]["outcomes"]["base-few-shot"] == base["outcomes"]["zero-shot"]
    read["summary"] = rr.summary_from_outcomes(read)
    assert "| untrained base | few-shot (worked examples) |" in rt.markdown(read)


@pytest.mark.parametrize(
    ("low", "high", "per_seed", "expected"),
    [
        (0.01, 0.05, [0.02, 0.03, 0.01], "agon better"),
        (0.01, 0.05, [0.02, 0.03, -0.01], "difference not shown"),  # one seed disagrees
        (-0.01, 0.05, [0.02, 0.03, 0.01], "difference not shown"),  # the interval reaches 0
        (-0.05, -0.01, [-0.02, -0.03, -0.01], "agon worse"),
        (-0.05, -0.01, [-0.02, 0.0, -0.01], "difference not shown"),  # a tie is no agreement
        (0.01, 0.05, [], "difference not shown"),
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


def test_an_equivalence_needs_a_margin_and_an_interval_inside_it() -> None:
    inside = {"low": -0.02, "high": 0.025, "per_seed": {"0": 0.01, "1": -0.01}}
    assert rr.verdict(inside, "agon") == "difference not shown"  # never "≈ 0" without a margin
    assert rr.verdict(inside, "agon", margin=0.03) == "equivalent within ±3 pp"
    assert rr.verdict(inside, "agon", margin=0.02) == "difference not shown"  # the interval reaches +2.5 pp
    apart = {"low": 0.01, "high": 0.05, "per_seed": {"0": 0.02, "1": -0.01}}
    assert rr.verdict(apart, "agon") == "difference not shown"  # a seed disagrees
    assert rr.verdict(apart, "agon", every_seed=False) == "agon better"  # the interval alone


def _study_doc(registered: list[str] | None, added: list[list[str]] = ()) -> dict:
    """A study's document with one seed of grpo and agon (agon +0.25 on every problem pair)."""
    grpo = _run_record({"standalone:agent_a": [1, 0, 1, 0], "self-cascade:agent_a": [1, 1, 0, 0]}, None)
    agon = _run_record(
        {
            "standalone:agent_a": [1, 1, 1, 0],
            "standalone:agent_b": [1, 1, 1, 0],
            "cascade:agent_a>agent_b": [1, 1, 1, 1],
        },
        "cascade:agent_a>agent_b",
    )
    for run in (grpo, agon):
        run["training"] = {"per_step": {}}
    from agon_env.study.plan import from_dict
    from agon_env.study.results import plan_record

    def study(comparisons: list[str]) -> Any:
        return from_dict(
            {
                "name": "t",
                "arms": {"grpo": {"algo": "grpo"}, "agon": {"algo": "agon"}},
                "seeds": [0],
                "evaluation": {"test_problems": 4},
                "comparisons": comparisons,
                "exploratory": ["grpo - agon"],
            }
        )

    ran = study(["agon - grpo"])
    plan = plan_record(ran)
    arms = {"grpo": {"0": grpo}, "agon": {"0": agon}}
    doc = {
        "plan": plan,
        "outcomes": {"arms": arms, "base": None, "missing": []},
        "added_comparisons": [list(p) for p in added],
        "complete": True,
        "model": "tiny",
        "task": {"env": "agon/arith-v0", "kwargs": {}},
        "calibration": {"measured": {}},
        "problems": {
            "test": {"ids": list("abcd")},
            "validation": {"ids": []},
            "test_prompts_in_training_pool": 0,
            "test_prompts_in_validation": 0,
        },
        "hashes": {"plan_sha256": ran.sha256()},
    }
    if registered is None:
        doc["registration"] = None
    else:  # as `agon study register` writes it
        frozen = study(registered)
        doc["registration"] = {"plan": frozen.as_dict(), "plan_sha256": frozen.sha256()}
    doc["summary"] = rr.summary_from_outcomes(doc)
    return doc


def test_comparisons_outside_the_registration_are_marked_exploratory() -> None:
    rows = {
        line.split(" | ")[0].strip("| "): line.rsplit(" | ", 1)[1].rstrip(" |")
        for line in rt.markdown(_study_doc(["agon - grpo"])).splitlines()
        if " − " in line and line.startswith("| ") and "," in line.split(" | ")[0]
    }
    # The registered primary comparison gets the rule's verdict; the plan's exploratory one and a
    # comparison the plan lists but the registration does not are marked.
    few = "cannot tell: 1 discordant pair(s), a two-sided test at 95 % needs at least 6"
    assert rows["agon − grpo, standalone"] == few
    assert rows["grpo − agon, standalone"] == f"exploratory (exploratory in the plan): {few}"
    unregistered = rt.markdown(_study_doc(None))
    assert "exploratory (study not registered): " in unregistered
    later = rt.markdown(_study_doc(["grpo - agon"]))  # registered with another primary comparison
    assert "| exploratory (the plan differs from its registration): " in later


def test_a_comparison_added_at_report_time_is_exploratory() -> None:
    doc = _study_doc(None)  # a plan naming no comparison (the file's plan view, unregistered)
    doc["plan"]["comparisons"], doc["plan"]["exploratory"] = [], []
    doc["added_comparisons"] = [["agon", "grpo"]]
    doc["summary"] = rr.summary_from_outcomes(doc)
    assert "agon − grpo, standalone" in doc["summary"]["paired"]
    assert "exploratory (added after the plan)" in rt.markdown(doc)
