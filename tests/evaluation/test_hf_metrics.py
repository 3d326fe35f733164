import pytest

from agon_env.evaluation.metrics import judge, module_path

evaluate = pytest.importorskip("evaluate")


def test_judge_math_and_exact():
    assert judge("\\boxed{1,000}", "1000")
    assert not judge("\\boxed{1,000}", "1000", match="exact")
    assert judge(" 7 ", "7", match="exact")
    with pytest.raises(ValueError):
        judge("1", "1", match="fuzzy")
    with pytest.raises(KeyError, match="shipped"):
        module_path("accuracy")


def test_accuracy_module_loads_from_a_local_path_and_gives_exact_intervals():
    acc = evaluate.load(module_path("agon_accuracy"))
    out = acc.compute(
        predictions=["42", "7", "\\frac{1}{2}", "x"] + ["0"] * 6,
        references=["42", "8", "0.5", "y"] + ["1"] * 6,
        timeout=120,
    )
    assert out["correct"] == 2 and out["n"] == 10 and out["accuracy"] == 0.2
    assert out["ci_low"] == pytest.approx(0.0252, abs=1e-4) and out["ci_high"] == pytest.approx(
        0.5561, abs=1e-4
    )


def test_pass_at_k_module():
    pak = evaluate.load(module_path("agon_pass_at_k"))
    out = pak.compute(predictions=[["41", "42"], ["7", "9"]], references=["42", "8"], k=[1, 2], timeout=120)
    assert out["pass@1"] == pytest.approx(0.25) and out["pass@2"] == pytest.approx(0.5)
    assert out["n_problems"] == 2 and out["pass@1_ci_low"] < 0.25 < out["pass@1_ci_high"]
    with pytest.raises(ValueError, match="exceeds"):
        pak.compute(predictions=[["1"]], references=["1"], k=[2])


def test_metrics_count_what_the_verifier_could_not_judge(monkeypatch):
    from agon_env.envs.tasks import verify
    from agon_env.envs.tasks.errors import VerifierError, VerifierTimeout

    def flaky(gold, pred, timeout=5.0):
        if pred == "slow":
            raise VerifierTimeout("overran")
        if pred == "odd":
            raise VerifierError("worker crashed")
        return gold == pred

    monkeypatch.setattr(verify, "answers_match", flaky)
    out = evaluate.load(module_path("agon_accuracy")).compute(
        predictions=["1", "slow", "odd", "2"], references=["1", "1", "1", "3"]
    )
    # unjudged answers are in neither count (86f3fbc: 1 of 4, the two unjudged counted wrong)
    assert (out["correct"], out["n"], out["score_errors"], out["score_timeouts"]) == (1, 2, 1, 1)
    assert out["unjudged"] == 2
    pak = evaluate.load(module_path("agon_pass_at_k")).compute(
        predictions=[["1", "slow"], ["odd", "odd"]], references=["1", "2"], k=[1]
    )
    # problem 2 has no judged answer and problem 1 one right of one judged (86f3fbc: 0.25)
    assert (pak["pass@1"], pak["score_errors"], pak["score_timeouts"], pak["unjudged"]) == (1.0, 2, 1, 3)
