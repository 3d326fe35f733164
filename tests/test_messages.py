"""What the commands and docs say is what they do: the message fixes of issue #40, item 6."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import agon_env
from agon_env.config import ConfigError, preset_config
from agon_env.envs.tasks.base import ListTask, Problem


@pytest.mark.parametrize(
    ("module", "function"),
    [
        ("agon_env.algorithms.commands.train", "main"),
        ("agon_env.evaluation.commands.eval", "eval_main"),
        ("agon_env.evaluation.commands.probe", "run_probe_cli"),
        ("agon_env.commands.envs", "envs_main"),
    ],
)
def test_every_imports_help_says_where_modules_are_found(module: str, function: str, capsys) -> None:
    import importlib

    assert getattr(importlib.import_module(module), function)(["--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "importable from the current folder or PYTHONPATH" in flat


def test_probe_says_reject_counts_a_missing_answer() -> None:
    from agon_env.evaluation.probe import ProbeOutcome, _same, analyse, table_rows

    assert not _same(None, "5")  # a reading without an answer "changed" the draft's
    wrong = [ProbeOutcome("p", False, False, reader_changed=True, leak=False)] * 2
    result = analyse([*wrong, ProbeOutcome("q", True, True, False, False)])
    assert result["reject"]["of"].endswith("(a missing answer counts as a change)")
    assert any(row[0].startswith("reject") and "no answer counts" in row[0] for row in table_rows(result))


def test_check_env_does_not_blame_the_user_for_api_tests_reset_options() -> None:
    from agon_env.conformance import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env("agon/arith-v0", num_cycles=2, seed_cycles=2)
    assert not [w for w in caught if "unknown reset options" in str(w.message)]
    env = agon_env.make("agon/arith-v0")
    with pytest.warns(UserWarning, match="ignoring unknown reset options"):  # a user's own call still warns
        env.reset(options={"drafer": "agent_b"})


class _NoSplit(ListTask):
    name = "no-split"

    def __init__(self) -> None:
        super().__init__([Problem(str(i), f"What is {i} + {i}?", str(2 * i)) for i in range(40)])

    def score(self, problem: Problem, answer: str) -> bool:
        return answer == problem.answer


def test_the_runs_heldout_check_names_no_flag_agon_train_lacks() -> None:
    from agon_env.evaluation.heldout import NoHeldout, heldout_base

    if "test/no-split-v0" not in agon_env.registered_ids():
        agon_env.register("test/no-split-v0", entry_point=_NoSplit)
    with pytest.raises(NoHeldout) as exc:
        heldout_base("test/no-split-v0", {}, policies=None, problems=10)  # type: ignore[arg-type]
    text = str(exc.value)
    assert "occur in the training pool of this run" in text and "training pool of training pool" not in text
    assert "--allow-overlap" not in text and "give its constructor a split= argument" in text


def test_preset_errors_name_the_preset_once_and_list_no_empty_choice(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("steps: [1\n")
    with pytest.raises(ConfigError) as exc:
        preset_config("bad.yaml")
    assert str(exc.value) == "preset bad.yaml: not valid YAML at line 2; fix the file"
    with pytest.raises(ConfigError) as exc:
        preset_config("nope")
    assert str(exc.value) == "--config nope: no such preset; pass a .yaml path (./configs has none)"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mine.yaml").write_text("steps: 3\n")
    with pytest.raises(ConfigError, match=r"pass a .yaml path or a preset of ./configs: mine$"):
        preset_config("nope")
