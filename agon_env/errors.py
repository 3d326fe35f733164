"""The user's errors: one base class, and the one "did you mean" of the package.

Every error that means "the command or config asked for something that cannot be" (a bad
config key, a missing run folder, an unknown model, a leaking selection, ...) derives from
:class:`UserError`, so a command line shows any of them as one line with a single
``except UserError``, while a defect in the code still ends in a traceback. Each keeps the
builtin base it had (``ConfigError`` is still a ``ValueError``), so no existing ``except``
clause changes meaning.

This module imports nothing of the package: every layer may raise these.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """Something the user asked for cannot be done; the message says what to fix, in one line."""


class InputError(UserError, ValueError):
    """A value the user gave (a flag, a config value, a file's content) that cannot be used."""


class UnknownName(UserError, KeyError):
    """An id or name nobody registered (an env id, a study unit): the message names the known ones."""


class MissingFile(UserError, FileNotFoundError):
    """A file or folder the user named that is not there (a plan, a results file, a dataset)."""


class NotInstalled(UserError, ImportError):
    """An optional package or a user's module that cannot be imported; the message says what to install."""


class WrongType(UserError, TypeError):
    """A value of the wrong kind where the user names one (an env id that is no string, or one that
    builds no task)."""


USER_ERRORS = (UserError, KeyError, ValueError, TypeError, FileNotFoundError, NotADirectoryError, ImportError)
"""What code that is not ours (a task's constructor, ``datasets``, the hub) raises for a mistyped
id, keyword or path: the seams that call such code with the user's input (building a run's env and
model, building a task to evaluate) turn these into one :class:`UserError` naming the input. A
command shows :class:`UserError` alone as one line (:mod:`agon_env.command`): anywhere else a
ValueError may be a defect, which deserves its traceback."""


def close_matches(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.4) -> list[str]:
    """The "did you mean" candidates for a mistyped name (the one fuzzy matcher of the package)."""
    return difflib.get_close_matches(name, list(known), n=n, cutoff=cutoff)


def unknown_id_message(kind: str, name: str, known: list[str]) -> str:
    """``unknown <kind> 'x'. Did you mean 'y'? Known: ...``: the one wording of an unknown name."""
    close = close_matches(name, known)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}.{hint} Known: {', '.join(known)}"


class ConfigError(UserError, ValueError):
    """A config that cannot run; the message has one line per problem, naming the key and the fix."""


class RunFolderError(UserError, ValueError, RuntimeError):
    """A folder cannot be used as a run as asked: missing, exists without --resume, incompatible,
    or holds nothing to evaluate. (Both builtin bases are kept: evaluation's error was a
    ``ValueError``, training's a ``RuntimeError``.)"""


class EntryPointError(UserError, ImportError):
    """A registered id whose entry point's module or attribute is missing."""


class UnknownKeywordError(UserError, TypeError):
    """``make`` was given a keyword neither the task (or env class) nor the env takes."""


class DoesNotFit(UserError, MemoryError):
    """The run's step would need more memory than the machine has."""


class BackendError(UserError, ValueError):
    """A backend that does not exist, or cannot serve this run's model."""
