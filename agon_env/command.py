"""What every ``agon`` subcommand shares: its common options, parsing, one-line errors, exit codes.

The command modules (``agon_env.commands.envs``, ``agon_env.algorithms.commands.train``,
``agon_env.evaluation.commands.eval``, ``agon_env.evaluation.commands.probe``, ``agon_env.serving.*``,
``agon_env.study.commands.study``) import this module, never :mod:`agon_env.cli`: the command table names
them by import path, so an import back would be a cycle the import graph cannot see.

The contract: a :class:`~agon_env.errors.UserError` (what the user asked for cannot be done) is
one line on stderr and exit status :data:`USER_ERROR`; anything else is a defect, shown as its
traceback with a bug-report hint and exit status :data:`DEFECT`, so a ``KeyError`` deep in a
command never reads as a one-line complaint about the user's input.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from agon_env.errors import UserError, close_matches


@dataclass
class CommandArgs:
    """The options every subcommand but ``train`` shares (``train`` has them in ``TrainConfig``)."""

    imports: list[str] = field(default_factory=list)
    """Modules to import first, so the env ids they register exist (importable from the current
    folder or PYTHONPATH)."""
    debug: bool = False
    """Show tracebacks instead of one-line errors (also ``AGON_DEBUG=1``)."""


Args = TypeVar("Args", bound=CommandArgs)

USER_ERROR = 2
"""The status of a refused command (what to fix is its one line), as argparse's for a bad flag."""
DEFECT = 70
"""The status of a command that met a defect (BSD sysexits' ``EX_SOFTWARE``): not the user's doing."""
PIPE_CLOSED = 141
"""The status of a command whose reader left: the shell's for a SIGPIPE death (128 + 13)."""
BUG_HINT = (
    "this is a defect in agon-env, not in what you asked for: please report it with the traceback "
    "above and the command line (AGON_DEBUG=1 lets Python print it unhandled)"
)


def exit_code(exc: SystemExit) -> int:
    """The status a ``SystemExit`` carries (tyro's ``--help`` is 0, a refused flag 2)."""
    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def pipe_closed() -> int:
    """Drop what is left to print, quietly, when stdout's reader left (``agon study status | head
    -1``), as ``cat`` does: no traceback, and none at exit when Python flushes stdout again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return PIPE_CLOSED


def debugging(debug: bool = False) -> bool:
    """``--debug`` or ``AGON_DEBUG=1``: let every error through with its traceback."""
    return debug or os.environ.get("AGON_DEBUG", "") not in ("", "0")


def user_error(prog: str, exc: UserError, debug: bool = False) -> int:
    """Print what to fix in one line and return :data:`USER_ERROR`; re-raise with ``debug``."""
    if debugging(debug):
        raise exc
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)  # KeyError's str() quotes
    print(f"{prog}: {' '.join(str(text).split())}", file=sys.stderr)
    return USER_ERROR


def defect(prog: str, exc: BaseException, debug: bool = False) -> int:
    """Print ``exc``'s traceback and the bug-report hint, return :data:`DEFECT`; re-raise with ``debug``."""
    if debugging(debug):
        raise exc
    traceback.print_exception(exc, file=sys.stderr)
    print(f"{prog}: {BUG_HINT}", file=sys.stderr)
    return DEFECT


def guarded(prog: str, body: Callable[[], int | None], debug: bool = False) -> int:
    """Run ``body`` under the contract: its status, a user error as one line, a defect as a
    traceback with the hint, a reader that left quietly."""
    try:
        code = int(body() or 0)
        sys.stdout.flush()  # a reader that left (``| head -1``) shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return pipe_closed()
    except UserError as exc:
        return user_error(prog, exc, debug)
    except Exception as exc:  # the one place every other error is shown: as a defect
        return defect(prog, exc, debug)


def run_command(cls: type[Args], argv: Sequence[str], prog: str, run: Callable[[Args], int | None]) -> int:
    """Parse ``argv`` into ``cls`` (tyro), import its ``imports`` and ``run`` it under :func:`guarded`."""
    import tyro

    from agon_env.registry import import_modules

    try:
        # One flag per bool (--quiet, --no-cache), as the commands have always had.
        args = tyro.cli(cls, args=list(argv), prog=prog, config=(tyro.conf.FlagCreatePairsOff,))
    except SystemExit as exc:  # --help, or a flag tyro refused (it printed why)
        return exit_code(exc)

    def body() -> int | None:
        import_modules(args.imports)
        return run(args)

    return guarded(prog, body, args.debug)


Subcommand = tuple[type[CommandArgs], Callable[[CommandArgs, Sequence[str]], int | None], str]
"""A row of a subcommand table: its options, what runs them (with the raw argv), one-line help."""


def table_usage(prog: str, summary: str, table: Mapping[str, tuple[object, ...]]) -> str:
    """The usage of a command that is a table of subcommands, generated from the table's rows
    (each ``(..., help)``), so the list cannot drift from what dispatches."""
    width = max(map(len, table))
    rows = "\n".join(f"  {name:<{width}}  {row[-1]}" for name, row in table.items())
    return (
        f"usage: {prog} COMMAND [ARGS ...]\n\n{summary}\n\ncommands:\n{rows}\n\n"
        f"{prog} COMMAND --help shows that command's options and their defaults."
    )


def dispatch(
    prog: str,
    argv: Sequence[str],
    table: Mapping[str, tuple[object, ...]],
    usage: str,
    start: Callable[[str, list[str]], int],
) -> int:
    """``prog NAME ARGS...``: usage on no name or ``--help``, a "did you mean" on an unknown one,
    else ``start(name, args)``; the one dispatcher of ``agon`` and ``agon study``."""
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else USER_ERROR
    name, rest = argv[0], argv[1:]
    if name not in table:
        guess = close_matches(name, list(table))
        hint = f"did you mean {' or '.join(guess)}?" if guess else f"choose from {', '.join(table)}"
        print(f"{prog}: unknown command {name!r}; {hint}", file=sys.stderr)
        return USER_ERROR
    return start(name, rest)
