"""The ``agon`` command line: ``agon envs``, ``agon episode``, ``agon train`` and friends.

Each subcommand lives next to the code it drives as a ``main(argv) -> int`` over a
dataclass parsed by tyro (its ``--help`` shows every field's docstring and default);
:data:`COMMANDS` maps a name to that function by its import path, so a new command is one
row and heavy imports (torch, transformers, matplotlib) happen only when that command runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agon_env.errors import UserError

COMMANDS = {
    "envs": ("agon_env.cli_envs:envs_main", "list the registered env ids"),
    "episode": (
        "agon_env.cli_envs:episode_main",
        "play one scripted episode: a wrong draft, a right challenge",
    ),
    "train": (
        "agon_env.algorithms.cli_train:main",
        "train adapters with an algorithm plugin (GRPO, agon, ...)",
    ),
    "eval": (
        "agon_env.evaluation.cli:eval_main",
        "evaluate run folders or the untrained base: pass@1 with intervals, baselines, blind spots",
    ),
    "plot": ("agon_env.evaluation.cli:plot_main", "figures from run folders and eval reports (PNG)"),
    "probe": (
        "agon_env.evaluation.probe_cli:run_probe_cli",
        "will a rival help here? solve vs verify rates and the cascade gap, before training",
    ),
}
"""Subcommand -> (``module:function`` taking the remaining arguments, one-line help)."""

USER_ERRORS = (UserError, KeyError, ValueError, TypeError, FileNotFoundError, ImportError)
"""What ``envs``, ``episode``, ``eval``, ``plot`` and ``probe`` show as one line (unless
``AGON_DEBUG=1``): every :class:`~agon_env.errors.UserError`, and what a mistyped id, keyword
or path raises from code that is not ours (a task's constructor, ``datasets``, the hub).
``agon train`` catches ``UserError`` alone: there a ValueError may be a defect."""


@dataclass
class CommandArgs:
    """The options every subcommand but ``train`` shares (``train`` has them in ``TrainConfig``)."""

    imports: list[str] = field(default_factory=list)
    """Modules to import first, so the env ids they register exist (importable from the current
    folder or PYTHONPATH)."""
    debug: bool = False
    """Show tracebacks instead of one-line errors (also ``AGON_DEBUG=1``)."""


Args = TypeVar("Args", bound=CommandArgs)


def exit_code(exc: SystemExit) -> int:
    """The status a ``SystemExit`` carries (tyro's ``--help`` is 0, a refused flag 2)."""
    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def user_error(prog: str, exc: BaseException, debug: bool = False) -> int:
    """Print what to fix in one line and return 2; re-raise with ``debug`` or ``AGON_DEBUG=1``."""
    if debug or os.environ.get("AGON_DEBUG", "") not in ("", "0"):
        raise exc
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)  # KeyError's str() quotes
    print(f"{prog}: {' '.join(str(text).split())}", file=sys.stderr)
    return 2


def run_command(cls: type[Args], argv: Sequence[str], prog: str, run: Callable[[Args], int | None]) -> int:
    """Parse ``argv`` into ``cls`` (tyro), import its ``imports`` and ``run`` it; a user error
    (:data:`USER_ERRORS`) is one line on stderr and exit status 2."""
    import tyro

    from agon_env.registry import import_modules

    try:
        # One flag per bool (--quiet, --no-cache), as the commands have always had.
        args = tyro.cli(cls, args=list(argv), prog=prog, config=(tyro.conf.FlagCreatePairsOff,))
    except SystemExit as exc:  # --help, or a flag tyro refused (it printed why)
        return exit_code(exc)
    try:
        import_modules(args.imports)
        return int(run(args) or 0)
    except USER_ERRORS as exc:
        return user_error(prog, exc, args.debug)


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {help}" for name, (_, help) in COMMANDS.items())
    return (
        f"usage: agon COMMAND [ARGS ...]\n\n{__doc__.splitlines()[0]}\n\ncommands:\n{rows}\n\n"
        "agon COMMAND --help shows that command's options and their defaults."
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        from agon_env.errors import close_matches

        guess = close_matches(name, list(COMMANDS))
        hint = f"did you mean {' or '.join(guess)}?" if guess else f"choose from {', '.join(COMMANDS)}"
        print(f"agon: unknown command {name!r}; {hint}", file=sys.stderr)
        return 2
    module, _, attr = COMMANDS[name][0].partition(":")
    try:
        command = getattr(importlib.import_module(module), attr)
    except ImportError as exc:  # an optional layer is not installed
        print(f"agon {name}: not available in this installation ({exc})", file=sys.stderr)
        return 2
    return int(command(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
