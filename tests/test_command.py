"""The one command contract (:mod:`agon_env.command`), held for every ``agon`` subcommand.

Each subcommand's first step after parsing is importing its ``--imports``; a stand-in for that
step raises, so the error comes from inside every command (``agon study``'s subcommands included)
without a model or a run: a :class:`~agon_env.errors.UserError` is one line and status 2, anything
else its traceback, the bug-report hint and status :data:`~agon_env.command.DEFECT`.
"""

from __future__ import annotations

import pytest

import agon_env.config
import agon_env.registry
from agon_env.cli import COMMANDS, main
from agon_env.command import BUG_HINT, DEFECT, USER_ERROR
from agon_env.errors import UnknownName, UserError
from agon_env.study.commands.study import SUBCOMMANDS

EVERY_COMMAND = [[name] for name in COMMANDS if name != "study"] + [["study", sub] for sub in SUBCOMMANDS]


def _raising(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def imports(_names: object) -> None:
        raise exc

    monkeypatch.setattr(agon_env.registry, "import_modules", imports)  # run_command's first step
    monkeypatch.setattr(agon_env.config, "import_user_modules", imports)  # train's (TrainConfig.imports)
    monkeypatch.delenv("AGON_DEBUG", raising=False)


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=" ".join)
def test_a_defect_inside_a_command_prints_its_traceback_not_one_misleading_line(command, monkeypatch, capsys):
    _raising(monkeypatch, KeyError("problem_index"))  # a defect: a key the code itself got wrong
    assert main([*command, "--imports", "x"]) == DEFECT
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'problem_index'" in err
    assert err.rstrip().endswith(BUG_HINT)


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=" ".join)
def test_a_user_error_inside_a_command_is_one_line_and_status_2(command, monkeypatch, capsys):
    _raising(monkeypatch, UserError("--imports x: no such module\n  (is it on PYTHONPATH?)"))
    assert main([*command, "--imports", "x"]) == USER_ERROR == 2
    err = capsys.readouterr().err
    prog = " ".join(["agon", *command])
    assert err == f"{prog}: --imports x: no such module (is it on PYTHONPATH?)\n"


def test_with_debug_a_user_error_keeps_its_traceback(monkeypatch):
    _raising(monkeypatch, UserError("what to fix"))
    with pytest.raises(UserError, match="what to fix"):
        main(["envs", "--imports", "x", "--debug"])


def test_what_a_user_types_wrong_is_a_user_error_not_a_bare_builtin():
    """The checks a command line reaches raise UserErrors (each keeping its builtin base)."""
    from agon_env.evaluation.checks import check_confidence, check_seeds
    from agon_env.evaluation.splits import load_eval_data

    refused = [
        lambda: check_confidence(2.0),
        lambda: check_seeds([0, 0]),
        lambda: load_eval_data("agon/arith-v0", {}, "test", 0, 0, 0),
        lambda: load_eval_data("agon/arith-v0", {"difficulty": "hard"}, "test", 2, 0, 0),
        lambda: agon_env.registry.spec("agon/arith-v9"),
    ]
    for call in refused:
        with pytest.raises(UserError):
            call()
    with pytest.raises(KeyError):  # an unknown id is still the KeyError it always was
        agon_env.registry.spec("agon/arith-v9")
    assert issubclass(UnknownName, KeyError)


def test_agon_study_dispatches_as_agon_does(capsys):
    assert main(["study", "stauts"]) == 2
    assert capsys.readouterr().err == "agon study: unknown command 'stauts'; did you mean status?\n"
    assert main(["study", "--help"]) == 0
    listed = capsys.readouterr().out.split("commands:\n", 1)[1]
    assert [line.split()[0] for line in listed.splitlines() if line.startswith("  ")] == list(SUBCOMMANDS)
