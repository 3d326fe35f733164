"""The league's errors: what a user is told, in one line, when a league cannot be played or read."""

from __future__ import annotations

from agon_env.errors import UserError


class LeagueError(UserError, ValueError):
    """A league that cannot be played as asked: different bases, no players, another league's folder."""


class LeagueFileError(UserError, ValueError):
    """A file given as a league that :func:`~agon_env.league.report.write_league` did not write."""
