"""``--resume`` continues the run folder's own run: its config, not the defaults or new flags.

Each test names the fault of a706827 it pins down (issue #40, item 2): the documented
``agon train --out-dir D --resume`` was refused (the defaults' model against the folder's) or
ran the defaults' step count; a changed env, lr, seed or step count was taken silently or
crashed; a run killed before its first checkpoint could be neither resumed nor restarted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from agon_env.algorithms.commands.train import main
from agon_env.config import TrainConfig, leaf_keys

TINY = ["--model", "tiny", "--imports", "parity_env", "--env", "test/parity-v0", "--batch-problems", "2"]
TINY += ["--n", "2", "--sampling.max-new-tokens", "4", "--no-progress", "--threads", "1"]
TINY += ["--heldout-problems", "0", "--time-budget-min", "0", "--divergence-kl-rollouts", "0"]


pytestmark = pytest.mark.usefixtures("parity_on_path")


def read_metrics(run: Path) -> list[dict]:
    # Imported here, as the names below that are new: on a706827 each test fails on what the
    # command does, not at import.
    from agon_env.run_folder import read_metrics as read

    return read(run)


def _started(run: Path, steps: int = 2) -> Path:
    assert main([*TINY, "--steps", str(steps), "--out-dir", str(run)]) == 0
    return run


def test_resume_with_no_other_flag_continues_the_folders_run(tmp_path, monkeypatch):
    from agon_env.algorithms.trainer import Trainer

    real, calls = Trainer.train_step, []

    def killed_at_the_third(self):  # the run is configured for 3 steps and killed after 2
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self)

    run = tmp_path / "run"
    monkeypatch.setattr(Trainer, "train_step", killed_at_the_third)
    assert main([*TINY, "--steps", "3", "--out-dir", str(run)]) == 130
    monkeypatch.setattr(Trainer, "train_step", real)
    # The folder's model is tiny and its steps 3: resuming must not bring the defaults back
    # (a706827: "model is 'tiny' ... but 'smollm2-135m' now").
    assert main(["--out-dir", str(run), "--resume"]) == 0
    assert [r["step"] for r in read_metrics(run)] == [0, 1, 2]
    assert torch.load(run / "checkpoint.pt", weights_only=False)["step"] == 3


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--env", "agon/arith-v0"], "env.id is 'test/parity-v0' there but 'agon/arith-v0' here"),
        (["--lr", "0.5"], "optim.lr is 0.0002 there but 0.5 here"),
        (["--seed", "5"], "seed is 0 there but 5 here"),
        (
            ["--steps", "4"],
            "steps is 2 there but 4 here. Drop those flags to continue it as configured (more steps",
        ),
        (["--steps", "1", "--extend"], "steps is 2 there but 1 here"),
    ],
)
def test_a_flag_that_changes_what_the_run_is_is_refused_in_one_line(tmp_path, capsys, flags, said):
    run = _started(tmp_path / "run")
    before = (run / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main(["--out-dir", str(run), "--resume", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and said in err, err
    assert (run / "metrics.jsonl").read_text() == before  # nothing ran


@pytest.mark.parametrize(
    ("edit", "flags", "said"),
    [
        ({"steps": 4}, [], "steps is 2 in its checkpoint but 4 now"),
        (
            {"optim": {"lr": 0.5}},
            ["--steps", "3", "--extend"],
            "optim.lr is 0.0002 in its checkpoint but 0.5 now",
        ),
        # Both change the problems' order, which the checkpoint's sampler position is for: they
        # were refused by a ValueError traceback from the sampler, naming no field.
        ({"seed": 1}, [], "seed is 0 in its checkpoint but 1 now"),
        ({"env": {"kwargs": {"size": 8}}}, [], "env.kwargs is {} in its checkpoint but {'size': 8} now"),
    ],
)
def test_a_hand_edit_of_config_yaml_is_refused_like_a_changed_flag(tmp_path, capsys, edit, flags, said):
    run = _started(tmp_path / "run")
    config = yaml.safe_load((run / "config.yaml").read_text())
    for key, value in edit.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    before = (run / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert main(["--out-dir", str(run), "--resume", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run / 'config.yaml'} was edited by hand" in err and said in err, err
    assert (run / "metrics.jsonl").read_text() == before  # nothing ran


def test_extend_then_a_kill_then_resume_is_no_hand_edit(tmp_path, monkeypatch):
    from agon_env.algorithms.trainer import Trainer

    run = _started(tmp_path / "run", steps=2)
    monkeypatch.setattr(Trainer, "train_step", lambda self: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["--out-dir", str(run), "--resume", "--steps", "3", "--extend"]) == 130
    monkeypatch.undo()
    assert main(["--out-dir", str(run), "--resume"]) == 0  # config.yaml and checkpoint both say 3
    assert [r["step"] for r in read_metrics(run)] == [0, 1, 2]


def test_how_a_run_is_carried_out_may_change_on_resume(tmp_path):
    run = _started(tmp_path / "run")
    flags = ["--time-budget-min", "5", "--save-every", "2", "--grpo.micro-batch", "1", "--progress"]
    assert main(["--out-dir", str(run), "--resume", *flags]) == 0  # finished already: nothing to do


def test_extend_trains_further_and_states_its_schedule(tmp_path, capsys):
    run = _started(tmp_path / "run", steps=2)
    capsys.readouterr()
    assert main(["--out-dir", str(run), "--resume", "--steps", "4", "--extend"]) == 0
    out = capsys.readouterr().out
    # linear decay, no warm-up round at 0.1 × 2 steps: at step 2 the 2-step schedule is at 0,
    # the 4-step one at (4 - 2) / (4 - 0) = 0.5 of 2e-4
    assert "extending the run from 2 to 4 steps at step 2" in out
    assert "the learning rate there is 0.0001 (it was 0)" in out
    assert [r["step"] for r in read_metrics(run)] == [0, 1, 2, 3]
    assert yaml.safe_load((run / "config.yaml").read_text())["steps"] == 4  # the folder says so now
    assert read_metrics(run)[2]["lr/agent_a"] == pytest.approx(1e-4)


def test_a_run_killed_before_its_first_checkpoint_starts_again_with_resume(tmp_path, capsys):
    run = _started(tmp_path / "run", steps=1)
    (run / "checkpoint.pt").unlink()  # as if killed during its first step
    capsys.readouterr()
    assert main([*TINY, "--steps", "1", "--out-dir", str(run), "--resume"]) == 0
    assert "has no checkpoint yet: starting it again from step 0" in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(run)] == [0]
    empty = tmp_path / "empty"
    empty.mkdir()  # created, then killed before it wrote anything
    assert main([*TINY, "--steps", "1", "--out-dir", str(empty), "--resume"]) == 0


def test_a_folder_that_is_no_run_is_not_resumed(tmp_path, capsys):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    assert main([*TINY, "--out-dir", str(other), "--resume"]) == 2
    assert "holds no config.yaml" in capsys.readouterr().err
    assert (other / "notes.txt").read_text() == "keep me"


def test_the_free_keys_are_config_keys_and_differences_name_each_leaf():
    from agon_env.config import HOW_IT_RUNS, differences

    assert set(leaf_keys()) >= HOW_IT_RUNS
    a = TrainConfig()
    b = TrainConfig()
    b.optim.lr, b.env.kwargs, b.progress = 1.0, {"difficulty": 3}, False
    found = sorted(differences(a, b))
    assert found == [
        ("env.kwargs", {}, {"difficulty": 3}),
        ("optim.lr", 2e-4, 1.0),
        ("progress", True, False),
    ]
    assert differences(a, TrainConfig()) == []
