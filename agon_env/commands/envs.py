"""``agon envs`` and ``agon episode``: the registered ids, and one scripted episode of one of them.

    agon envs --imports my_tasks               # the built-in ids, installed entry points, my_tasks.py's
    agon episode --env agon/gsm8k-v0 --seed 3  # a wrong draft, a right challenge, rendered

Both are dataclasses parsed by tyro, like every ``agon`` subcommand (:mod:`agon_env.command`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agon_env.command import CommandArgs, run_command
from agon_env.config import EnvConfig


@dataclass
class EnvsArgs(CommandArgs):
    """List the registered env ids: built in, declared by installed packages (entry points), imported."""


def envs_main(argv: Sequence[str]) -> int:
    return run_command(EnvsArgs, argv, "agon envs", _print_envs)


def _print_envs(_args: EnvsArgs) -> None:
    from rich.console import Console
    from rich.table import Table

    import agon_env
    from agon_env.envs.tasks.data import offline_status

    table = Table(title="registered envs")
    table.add_column("id")
    table.add_column("offline")
    table.add_column("description")
    for s in agon_env.all_specs():
        missing = s.missing_module()  # an entry point whose package is gone cannot be made at all
        status = f"no: module {missing!r} is missing" if missing else offline_status(s)
        table.add_row(s.id, status, s.description)
    Console().print(table)


@dataclass
class EpisodeArgs(CommandArgs):
    """Play one scripted episode (a wrong draft, then a right challenge) and print it."""

    env: str = EnvConfig.id
    """Registered env id (see ``agon envs``), or ``module:id`` to import ``module`` first."""
    mode: str | None = None
    """Env mode (None: the id's own, draft and challenge for the built-in ones)."""
    reward_scheme: str | None = None
    """Reward scheme (None: the id's own)."""
    seed: int = 0
    """Seeds the problem the episode is played on."""


def episode_main(argv: Sequence[str]) -> int:
    return run_command(EpisodeArgs, argv, "agon episode", _play_episode)


def _play_episode(args: EpisodeArgs) -> None:
    import agon_env

    given = {"mode": args.mode, "reward_scheme": args.reward_scheme}
    env = agon_env.make(args.env, **{k: v for k, v in given.items() if v is not None}, render_mode="ansi")
    env.reset(seed=args.seed)
    gold = env.problem.answer if isinstance(env.problem.answer, str) else "?"
    wrong = f"I guess quickly. <summary>Guessed without working it out.</summary><answer>{gold}1</answer>"
    right = f"Re-deriving step by step. <summary>Recomputed each step.</summary><answer>{gold}</answer>"
    for _agent in env.agent_iter():
        _obs, _r, term, trunc, _info = env.last()
        env.step(None if term or trunc else (wrong if not env.turns else right))
    print(env.render())
