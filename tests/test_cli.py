import subprocess
import sys

from agon_env.cli import main


def test_agon_envs_lists_builtin_ids(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for i in ("agon/arith-v0", "agon/math-v0", "agon/gsm8k-v0", "agon/deepmath-v0", "agon/humaneval-v0"):
        assert i in out


def test_agon_episode_prints_a_conversion(capsys):
    assert main(["episode", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "challenger agent_b: correct=True" in out and "'agent_b': 3.5" in out


def test_console_script_installed():
    r = subprocess.run(
        [sys.executable, "-m", "agon_env.cli", "envs"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "agon/arith-v0" in r.stdout


def test_agon_train_hands_its_arguments_to_the_config_parser(capsys):
    import yaml

    from agon_env.config import TrainConfig, to_dict

    assert main(["train", "--print-config"]) == 0
    assert capsys.readouterr().out == yaml.safe_dump(to_dict(TrainConfig()), sort_keys=False)
    assert main(["train", "--steps", "-1", "--print-config"]) == 2
    assert "steps = -1: set it to 1 or more" in capsys.readouterr().err
    assert main(["train", "-h"]) == 0
    assert "--optim.lr FLOAT" in capsys.readouterr().out


def test_agon_episode_with_an_unknown_id_says_so_in_one_line(capsys, monkeypatch):
    monkeypatch.delenv("AGON_DEBUG", raising=False)
    assert main(["episode", "--env", "agon/arith-v1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("agon episode: unknown env id 'agon/arith-v1'") and "'agon/arith-v0'" in err


def test_ctrl_c_in_train_names_the_checkpoint_and_how_to_continue(capsys, monkeypatch, tmp_path):
    import torch

    import agon_env.algorithms.run as run
    from agon_env.run_folder import CHECKPOINT

    run_dir = tmp_path / "run"

    def interrupted(cfg):
        run_dir.mkdir()
        torch.save({"step": 3}, run_dir / CHECKPOINT)
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "train", interrupted)
    monkeypatch.delenv("AGON_DEBUG", raising=False)
    assert main(["train", "--model", "tiny", "--steps", "5", "--out-dir", str(run_dir)]) == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"{run_dir} holds the checkpoint of step 3 of 5" in err and "--resume" in err


_VOWELS = """
import agon_env
from agon_env.envs.tasks.base import ListTask, Problem


class Vowels(ListTask):
    name = "vowels"

    def __init__(self):
        super().__init__([Problem(str(i), f"How many vowels are in {w!r}?", str(sum(c in "aeiou" for c in w)))
                          for i, w in enumerate(["banana", "sky", "queue"])])

    def score(self, problem, answer):
        return answer.strip() == problem.answer


agon_env.register("me/vowels-v0", "vowels:Vowels")
"""


def test_every_subcommand_imports_user_tasks_from_the_current_folder(tmp_path):
    (tmp_path / "vowels.py").write_text(_VOWELS)
    # -P: no current folder on sys.path, as for the installed console script.
    agon = [sys.executable, "-P", "-c", "import sys; from agon_env.cli import main; sys.exit(main())"]
    episode = ["episode", "--imports", "vowels", "--env", "me/vowels-v0"]
    for args in (["envs", "--imports", "vowels"], episode):
        r = subprocess.run([*agon, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "vowels" in r.stdout
    r = subprocess.run(
        [*agon, "train", "--imports", "vowels", "--env", "me/vowels-v0", "--model", "tiny", "--print-config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "me/vowels-v0" in r.stdout


def test_help_envs_and_the_help_of_every_command_import_no_heavy_library():
    # A fresh interpreter: what `agon --help` and `agon envs` cost a user, whatever ran before.
    code = (
        "import contextlib, io, sys\n"
        "from agon_env.cli import COMMANDS, main\n"
        "argvs = [['--help'], ['envs'], *[[name, '--help'] for name in COMMANDS]]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    codes = [main(argv) for argv in argvs]\n"
        "assert codes == [0] * len(argvs), codes\n"
        "print([m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_eval_help_shows_the_defaults_of_its_dataclass(capsys):
    from agon_env.config import ModelConfig
    from agon_env.evaluation.commands.eval import EvalArgs

    assert main(["eval", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert EvalArgs.__dataclass_fields__["device"].default == ModelConfig.device  # train's default
    for flag, default in (("--device", ModelConfig.device), ("--problems", 100), ("--split", "test")):
        assert flag in out and f"(default: {default})" in out
    assert "Interval coverage. (default: 0.95)" in out


def test_an_unknown_command_or_flag_is_refused_with_status_2(capsys):
    assert main(["evl"]) == 2
    assert capsys.readouterr().err.startswith("agon: unknown command 'evl'; did you mean eval")
    assert main(["plot", "--no-such-flag"]) == 2
    assert "--no-such-flag" in capsys.readouterr().err
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("envs", "episode", "train", "eval", "plot", "probe"))
