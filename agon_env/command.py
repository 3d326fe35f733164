"""What every ``agon`` subcommand shares: its common options, parsing, one-line errors, exit codes.

The command modules (``agon_env.cli_envs``, ``agon_env.algorithms.cli_train``,
``agon_env.evaluation.cli``, ``agon_env.evaluation.probe_cli``) import this module, never
:mod:`agon_env.cli`: the command table names them by import path, so an import back would be a
cycle the import graph cannot see. The list of errors shown as one line is
:data:`agon_env.errors.USER_ERRORS`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agon_env.errors import USER_ERRORS


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


PIPE_CLOSED = 141
"""The status of a command whose reader left: the shell's for a SIGPIPE death (128 + 13)."""


def pipe_closed() -> int:
    """Drop what is left to print, quietly, when stdout's reader left (``agon study status | head
    -1``), as ``cat`` does: no traceback, and none at exit when Python flushes stdout again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return PIPE_CLOSED


def user_error(prog: str, exc: BaseException, debug: bool = False) -> int:
    """Print what to fix in one line and return 2; re-raise with ``debug`` or ``AGON_DEBUG=1``."""
    if debug or os.environ.get("AGON_DEBUG", "") not in ("", "0"):
        raise exc
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)  # KeyError's str() quotes
    print(f"{prog}: {' '.join(str(text).split())}", file=sys.stderr)
    return 2


def run_command(cls: type[Args], argv: Sequence[str], prog: str, run: Callable[[Args], int | None]) -> int:
    """Parse ``argv`` into ``cls`` (tyro), import its ``imports`` and ``run`` it; a user error
    (:data:`~agon_env.errors.USER_ERRORS`) is one line on stderr and exit status 2."""
    import tyro

    from agon_env.registry import import_modules

    try:
        # One flag per bool (--quiet, --no-cache), as the commands have always had.
        args = tyro.cli(cls, args=list(argv), prog=prog, config=(tyro.conf.FlagCreatePairsOff,))
    except SystemExit as exc:  # --help, or a flag tyro refused (it printed why)
        return exit_code(exc)
    try:
        import_modules(args.imports)
        code = int(run(args) or 0)
        sys.stdout.flush()  # a reader that left (``| head -1``) shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return pipe_closed()
    except USER_ERRORS as exc:
        return user_error(prog, exc, args.debug)
