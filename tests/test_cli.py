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

    from agon_env.algorithms.config import TrainConfig, to_dict

    assert main(["train", "--print-config"]) == 0
    assert capsys.readouterr().out == yaml.safe_dump(to_dict(TrainConfig()), sort_keys=False)
    assert main(["train", "--steps", "-1", "--print-config"]) == 2
    assert "steps = -1: set it to 1 or more" in capsys.readouterr().err
    assert main(["train", "-h"]) == 0
    assert "--optim.lr FLOAT" in capsys.readouterr().out
