"""``agon eval`` and ``agon probe`` refuse what they are given before any set-up (issue 58, item 3):
a coverage outside (0, 1), a seed twice, one run twice (by folder or by weights), an unknown model."""

from __future__ import annotations

import shutil

import pytest

from agon_env.evaluation.checks import (
    check_confidence,
    check_distinct_adapters,
    check_distinct_folders,
    check_seeds,
)
from agon_env.evaluation.commands.eval import eval_main
from agon_env.evaluation.commands.probe import run_probe_cli

pytest.importorskip("peft")

TINY = [
    "--model",
    "tiny",
    "--problems",
    "2",
    "--val-problems",
    "1",
    "--max-new-tokens",
    "4",
    "--quiet",
    "--no-cache",
]


@pytest.fixture
def no_set_up(monkeypatch):
    """Any task built, eval data loaded or model loaded fails the test: the refusal came too late."""
    import agon_env.evaluation.splits as splits
    from agon_env.agents.adapters import SharedBase

    def late(*_a, **_k):
        raise AssertionError("set-up began before the refusal")

    for owner, name in ((splits, "load_eval_data"), (splits, "build_task")):
        monkeypatch.setattr(owner, name, late)
    monkeypatch.setattr(SharedBase, "from_source", classmethod(late))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run folder with two saved adapters."""
    from agon_env.agents.adapters import LoraSpec, SharedBase

    folder = tmp_path_factory.mktemp("runs") / "r"
    base = SharedBase.from_source("tiny")
    for i, name in enumerate(("agent_a", "agent_b")):
        base.add_adapter(name, LoraSpec(r=4, alpha=8, init_seed=i, init_b_std=0.05))
        base.save(name, folder / "adapters" / name)
    (folder / "config.yaml").write_text(
        "algo: agon\nmodel: {name: tiny, lora_r: 4, lora_alpha: 8}\nenv: {id: agon/arith-v0}\n"
    )
    return folder


def _refused(argv, capsys) -> str:
    assert eval_main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize("value", ["1.5", "1", "0", "-0.1", "nan"])
def test_a_coverage_outside_0_1_is_refused_before_any_set_up(value, no_set_up, tmp_path, capsys):
    err = _refused([*TINY, "--confidence", value, "--out", tmp_path / "o"], capsys)
    assert (
        err == f"agon eval: --confidence {float(value)}: an interval's coverage must be in (0, 1), e.g. 0.95"
    )
    assert not (tmp_path / "o").exists()


def test_a_seed_given_twice_is_refused(no_set_up, tmp_path, capsys):
    err = _refused([*TINY, "--seeds", "0", "1", "0", "--out", tmp_path / "o"], capsys)
    assert err.startswith("agon eval: --seeds 0 1 0: seed 0 given twice")


def test_one_run_folder_given_twice_is_refused(run, no_set_up, tmp_path, capsys):
    err = _refused([run, f"{run}/.", *TINY, "--out", tmp_path / "o"], capsys)
    assert err.startswith(f"agon eval: {run} and {run}/. are one run folder")


def test_a_copied_run_is_refused_by_its_adapters_weights(run, no_set_up, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    err = _refused([run, copy, *TINY, "--out", tmp_path / "o"], capsys)
    assert err.startswith(f"agon eval: {run} and {copy} hold the same adapters (weights agent_a ")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "flag, value, shown",
    [
        ("--temperature", "-1", "-1.0"),
        ("--top-p", "0", "0.0"),
        ("--max-new-tokens", "0", "0"),
        ("--batch-size", "0", "0"),
    ],
)
def test_a_sampling_flag_out_of_range_is_refused_before_any_set_up(
    flag, value, shown, no_set_up, tmp_path, capsys
):
    argv = ["--model", "tiny", "--quiet", "--no-cache", flag, value, "--out", tmp_path / "o"]
    assert _refused(argv, capsys).startswith(f"agon eval: {flag} {shown}: ")
    if flag in ("--temperature", "--max-new-tokens"):  # the two agon probe overrides
        assert run_probe_cli(["--model", "tiny", flag, value, "--out", str(tmp_path / "p.json")]) == 2
        assert capsys.readouterr().err.startswith(f"agon probe: {flag} {shown}: ")


def test_runs_that_share_only_some_adapters_are_two_runs():
    # An adapter left untrained from the same seed in two runs does not make them one run.
    check_distinct_adapters({"a": {"agent_a": "1", "agent_b": "2"}, "b": {"agent_a": "1", "agent_b": "3"}})
    with pytest.raises(ValueError, match="a and c hold the same adapters"):
        check_distinct_adapters({"a": {"agent_a": "1"}, "b": {"agent_a": "2"}, "c": {"agent_a": "1"}})


def test_the_pure_checks_pass_what_is_sound():
    check_confidence(0.95)
    check_seeds([0, 1, 2])
    check_distinct_folders(["runs/a", "runs/b"])
    with pytest.raises(ValueError, match="--confidence inf"):
        check_confidence(float("inf"))
    with pytest.raises(ValueError, match="at least one sampling seed"):
        check_seeds([])


@pytest.mark.parametrize("model", ["/no/such/model", "not a model"])
def test_probe_refuses_an_unknown_model_before_building_its_task(model, no_set_up, tmp_path, capsys):
    out = tmp_path / "probe.json"
    assert run_probe_cli(["--model", model, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"agon probe: unknown model {model!r}") and err.count("\n") == 1
    assert not out.exists()
