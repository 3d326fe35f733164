"""The ``agon`` command line: ``agon envs``, ``agon episode``, ``agon train`` and friends.

Each subcommand lives next to the code it drives and contributes an
``add_parser(subparsers)`` that sets ``func``; this module only collects them, so a new
command is one line in ``_COMMANDS`` and heavy imports (torch) happen only when that
command runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from agon_env.errors import UserError

_COMMANDS = (
    "agon_env.cli:add_envs_parser",
    "agon_env.cli:add_episode_parser",
    "agon_env.algorithms.cli_train:add_train_parser",
    "agon_env.evaluation.cli:add_eval_parser",
    "agon_env.evaluation.cli:add_plot_parser",
    "agon_env.evaluation.probe_cli:add_probe_parser",
)


def add_imports_argument(p: argparse.ArgumentParser) -> None:
    """``--imports MODULE ...``: modules that register user tasks (every subcommand takes it)."""
    p.add_argument(
        "--imports",
        nargs="+",
        default=[],
        metavar="MODULE",
        help="modules to import first, so the env ids they register exist (the current folder is importable)",
    )


def add_envs_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("envs", help="list the registered env ids")
    add_imports_argument(p)
    p.set_defaults(func=_run_envs)


def _run_envs(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    import agon_env
    from agon_env.envs.tasks.data import offline_status

    table = Table(title="registered envs")
    table.add_column("id")
    table.add_column("offline")
    table.add_column("description")
    for s in agon_env.all_specs():
        table.add_row(s.id, offline_status(s), s.description)
    Console().print(table)
    return 0


def add_episode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "episode", help="play one scripted episode (a wrong draft, a right challenge) and print it"
    )
    p.add_argument("--env", default="agon/arith-v0")
    p.add_argument("--mode", default="challenge")
    p.add_argument("--reward-scheme", default="conversion")
    p.add_argument("--seed", type=int, default=0)
    add_imports_argument(p)
    p.set_defaults(func=_run_episode)


def _run_episode(args: argparse.Namespace) -> int:
    import agon_env

    env = agon_env.make(args.env, mode=args.mode, reward_scheme=args.reward_scheme, render_mode="ansi")
    env.reset(seed=args.seed)
    gold = env.problem.answer if isinstance(env.problem.answer, str) else "?"
    wrong = f"I guess quickly. <summary>Guessed without working it out.</summary><answer>{gold}1</answer>"
    right = f"Re-deriving step by step. <summary>Recomputed each step.</summary><answer>{gold}</answer>"
    for _agent in env.agent_iter():
        _obs, _r, term, trunc, _info = env.last()
        env.step(None if term or trunc else (wrong if not env.turns else right))
    print(env.render())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agon", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for target in _COMMANDS:
        module, _, attr = target.partition(":")
        try:
            add = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:  # an optional layer is not installed
            sub.add_parser(
                target.split(":")[1].removeprefix("add_").removesuffix("_parser"), help=f"unavailable: {exc}"
            )
            continue
        add(sub)
    return parser


def user_error(prog: str, exc: BaseException, debug: bool = False) -> int:
    """Print what to fix in one line and return 2; re-raise with ``debug`` or ``AGON_DEBUG=1``."""
    if debug or os.environ.get("AGON_DEBUG", "") not in ("", "0"):
        raise exc
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)  # KeyError's str() quotes
    print(f"{prog}: {' '.join(str(text).split())}", file=sys.stderr)
    return 2


def add_forwarding_parser(
    sub: argparse._SubParsersAction, name: str, help: str, run: Callable[[list[str]], int]
) -> argparse.ArgumentParser:
    """A subcommand whose every argument goes as is to ``run`` (a tyro dataclass parser):
    "+" is no flag prefix anyone uses, so argparse forwards ``--flags`` untouched."""
    p = sub.add_parser(name, help=help, prefix_chars="+", add_help=False)
    p.add_argument("argv", nargs="*")
    p.set_defaults(func=lambda args: run(args.argv))
    return p


USER_ERRORS = (UserError, KeyError, ValueError, TypeError, FileNotFoundError, ImportError)
"""What ``envs``, ``episode``, ``eval``, ``plot`` and ``probe`` show as one line (unless
``AGON_DEBUG=1``): every :class:`~agon_env.errors.UserError`, and what a mistyped id, keyword
or path raises from code that is not ours (a task's constructor, ``datasets``, the hub).
``agon train`` catches ``UserError`` alone: there a ValueError may be a defect."""


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not hasattr(args, "func"):
        print(f"agon {args.command}: not available in this installation", file=sys.stderr)
        return 2
    if args.command not in ("envs", "episode"):
        return int(args.func(args) or 0)
    try:
        from agon_env.registry import import_modules

        import_modules(args.imports)
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        return user_error(f"agon {args.command}", exc)


if __name__ == "__main__":
    sys.exit(main())
