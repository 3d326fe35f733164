"""EnvOptions is the one list of the env's keywords: a field added there reaches the env,
``spawn``, the train config, ``agon train``'s flags and the eval task builder, with no other
edit (docs/envs.md, "Adding an env keyword")."""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import agon_env
from agon_env.config import EnvConfig, leaf_keys
from agon_env.envs import rewards
from agon_env.envs.draft_challenge import DraftChallengeEnv
from agon_env.options import ENV_KWARGS, EnvOptions

ROOT = Path(__file__).resolve().parents[2]

# What the copy of the package runs once its EnvOptions has one more field, ``shout``.
_CHECK = """
import agon_env
from agon_env.algorithms.builders import build_env
from agon_env.algorithms.commands.train import parse_train_args
from agon_env.algorithms.validation import load_config, resolve
from agon_env.config import ConfigError
from agon_env.options import ENV_KWARGS
from agon_env.evaluation.splits import build_task

assert "shout" in ENV_KWARGS
env = agon_env.make("agon/arith-v0", shout=True)
assert env.unwrapped.shout is True and env.spawn().shout is True and env.options.shout is True
assert agon_env.make("agon/arith-v0").unwrapped.shout is False  # the field's default
cfg = load_config(overrides={"env.shout": True, "steps": 1})
run = resolve(cfg)
assert cfg.env.shout is True and run.env.shout is True and run.env_keywords()["shout"] is True
assert build_env(run).unwrapped.shout is True
assert parse_train_args(["--env.shout"])[0].config.env.shout is True
build_task("agon/arith-v0", {"shout": True})  # an env keyword never reaches the task
try:
    load_config(overrides={"env.kwargs": {"shout": True}})
except ConfigError as exc:
    assert "env.<name>" in str(exc), exc
else:
    raise AssertionError("an env keyword in env.kwargs was accepted")
print("ok")
"""


def test_a_field_added_to_env_options_reaches_env_config_and_cli(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "agon_env", tmp_path / "agon_env", ignore=shutil.ignore_patterns("__pycache__"))
    source = tmp_path / "agon_env" / "options.py"
    text = source.read_text()
    anchor = "\n\n\nENV_KWARGS = "
    assert text.count(anchor) == 1 and text.index("class EnvOptions") < text.index(anchor)
    field = '\n    shout: bool = False\n    """A test keyword, added here and nowhere else."""'
    source.write_text(text.replace(anchor, field + anchor))
    run = subprocess.run(
        [sys.executable, "-c", _CHECK],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
    help_run = subprocess.run(
        [sys.executable, "-m", "agon_env.algorithms.commands.train", "--help"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "--env.shout" in help_run.stdout and "A test keyword" in help_run.stdout, (
        help_run.stdout[-3000:] + help_run.stderr[-2000:]
    )


def test_env_keywords_are_the_fields_and_their_defaults_the_env_defaults() -> None:
    names = [f.name for f in dataclasses.fields(EnvOptions)]
    assert ENV_KWARGS == frozenset(names) == DraftChallengeEnv.keywords()
    assert EnvOptions().lam == rewards.FORMAT_WEIGHT and EnvOptions().reward_scheme == rewards.PAPER_SCHEME
    env = agon_env.make("agon/arith-v0").unwrapped
    assert env.options == EnvOptions() and all(getattr(env, n) == getattr(EnvOptions(), n) for n in names)


def test_spawn_and_options_carry_every_keyword() -> None:
    chosen = EnvOptions(mode="self", lam=1.0, gamma=0.1, exchange="redacted", tiebreak_drafter=True)
    env = agon_env.make("agon/arith-v0", **dataclasses.asdict(chosen)).unwrapped
    assert env.options == chosen and env.spawn().options == chosen
    assert DraftChallengeEnv(env.task, chosen, lam=2.0).options == dataclasses.replace(chosen, lam=2.0)


def test_the_train_config_has_every_keyword_but_the_algorithms_two() -> None:
    keys = {k.removeprefix("env.") for k in leaf_keys() if k.startswith("env.")}
    assert keys == (ENV_KWARGS - {"mode", "reward_scheme"}) | {"id", "kwargs"}
    assert isinstance(EnvConfig(), EnvOptions)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return out | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_the_registry_imports_no_env_and_the_agents_no_envs() -> None:
    assert not {m for m in _imports(ROOT / "agon_env" / "registry.py") if m.startswith("agon_env.envs.")} - {
        "agon_env.envs.tasks.data"  # where the offline data folder is, not an env
    }
    for path in sorted((ROOT / "agon_env" / "agents").glob("*.py")):
        assert not {m for m in _imports(path) if m.startswith("agon_env.envs")}, path.name
