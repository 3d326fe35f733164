"""Training on code envs: an Agon step goes through the sandbox via the env, and the pool a run
trains on never holds a test problem (refused before any model loads)."""

from __future__ import annotations

import shutil

import pytest

import agon_env
from agon_env.algorithms.builders import SetupError, build_env
from agon_env.algorithms.commands.train import main
from agon_env.algorithms.validation import load_config, resolve
from agon_env.envs.tasks.base import ListTask, Problem, content_split
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.fixtures import MBPP_FIXTURE_IDS, write_mbpp_fixture
from agon_env.registry import _REGISTRY
from agon_env.run_folder import read_metrics

# A model that cannot load: a refusal that names the test split shows the check ran first.
NO_MODEL = ["--model", "no/such-model", "--steps", "1", "--no-progress"]


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap not installed (scripts/setup.sh installs it)"
)
def test_agon_step_on_mbpp_with_the_tiny_model(tmp_path):
    data = write_mbpp_fixture(tmp_path / "mbpp.jsonl")
    run = tmp_path / "mbpp"
    argv = ["--model", "tiny", "--algo", "agon", "--env", "agon/mbpp-v0", "--env.kwargs", f"path={data}"]
    argv += ["--batch-problems", "2", "--n", "2", "--sampling.max-new-tokens", "8", "--steps", "1"]
    argv += ["--no-progress", "--threads", "1", "--heldout-problems", "0", "--out-dir", str(run)]
    assert main(argv) == 0
    (record,) = read_metrics(run)
    assert record["step"] == 0 and record["time/scoring"] > 0
    assert 0 <= record["acc/drafter"] <= 1 and 0 <= record["groups_dropped"] <= 1


def _pool(env_id, **kwargs):
    cfg = load_config(None, {"model.name": "no/such-model", "env.id": env_id, "env.kwargs": kwargs})
    return build_env(resolve(cfg)).task


def test_the_training_pool_is_the_train_split(tmp_path):
    data = str(write_mbpp_fixture(tmp_path / "mbpp.jsonl"))
    assert [p.meta["task_id"] for p in _pool("agon/mbpp-v0", path=data)] == list(MBPP_FIXTURE_IDS["train"])


@pytest.mark.skipif(local_file("codecontests_sample.jsonl") is None, reason="no codecontests sample")
def test_codecontests_with_default_kwargs_trains_only_on_train_problems(tmp_path, capsys):
    pool = _pool("agon/codecontests-v0")
    assert len(pool) == 150 and all(content_split(p.prompt) == "train" for p in pool)
    run = tmp_path / "run"
    rc = main(
        [*NO_MODEL, "--env", "agon/codecontests-v0", "--env.kwargs", "split=test", "--out-dir", str(run)]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2
        and "(52 problems, split='test') holds 46 prompts of the test split" in err
        and "--env.kwargs split=train" in err
    )
    assert "cannot load model" not in err and not run.exists()


def _leaky(split: str = "train") -> ListTask:
    """A task that takes ``split`` and ignores it (what CodeContests from a file did)."""

    class Leaky(ListTask):
        def score(self, problem: Problem, answer: str) -> bool:
            return answer == problem.answer

    return Leaky([Problem(str(i), f"What is {i} + 1?", str(i + 1)) for i in range(4)], name="leaky")


def _no_split(n: int = 3) -> ListTask:
    return _leaky()


@pytest.fixture
def registered():
    ids = []

    def register(env_id, entry):
        agon_env.register(env_id, entry_point=entry)
        ids.append(env_id)

    yield register
    for env_id in ids:
        _REGISTRY.pop(env_id)


def test_a_pool_that_overlaps_test_is_refused_before_the_model_loads(tmp_path, capsys, registered):
    registered("test/leaky-v0", _leaky)
    run = tmp_path / "run"
    assert main([*NO_MODEL, "--env", "test/leaky-v0", "--out-dir", str(run)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        "env test/leaky-v0" in line
        and "(4 problems, split='train') holds 4 prompts of the test split" in line
    )
    assert "e.g. 'What is 0 + 1?'" in line and "must build disjoint splits" in line
    assert "cannot load model" not in line and not run.exists()
    with pytest.raises(SetupError, match="holds 4 prompts"):
        _pool("test/leaky-v0")


def test_training_on_the_test_split_or_on_humaneval_is_refused(tmp_path, capsys):
    assert main([*NO_MODEL, "--env.kwargs", "split=test", "--out-dir", str(tmp_path / "a")]) == 2
    assert "prompts of the test split (e.g. 'What is" in capsys.readouterr().err
    assert main([*NO_MODEL, "--env", "agon/humaneval-v0", "--out-dir", str(tmp_path / "b")]) == 2
    assert "HumanEval is a test set only" in capsys.readouterr().err


def test_a_task_without_splits_still_trains_and_says_nothing_is_held_out(capsys, registered):
    registered("test/no-split-v0", _no_split)
    assert len(_pool("test/no-split-v0")) == 4
    out = capsys.readouterr().out
    assert "test/no-split-v0 takes no split=, so nothing is held out of training" in out
    assert "give its constructor a split= argument" in out
