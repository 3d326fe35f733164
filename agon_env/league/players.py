"""Who plays in a league: every snapshot of every adapter of the given runs, and their final adapters.

A run folder trained with ``--snapshot-every K`` keeps each adapter at every K-th step
(:meth:`~agon_env.run_folder.RunFolder.snapshot_steps`); its final adapters (``adapters/``) play
as the run's last step unless a snapshot of that step is already there (the same weights). All
players must share one base model: a league between adapters of different bases measures
nothing, and is refused in one line before any model loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agon_env.league.errors import LeagueError
from agon_env.league.games import Player
from agon_env.resolved import ResolvedRun
from agon_env.run_folder import RunFolder, load_resolved, read_metrics


@dataclass(frozen=True)
class Contender:
    """A player and where its weights are."""

    player: Player
    weights: Path
    """The player's peft folder (a snapshot, or the run's final adapter)."""
    run: ResolvedRun
    """The run it comes from, as training resolved it (its sampling, prompts, base)."""


def final_step(run_dir: Path) -> int:
    """The steps the run completed (its final adapters are the weights after them)."""
    return len(read_metrics(run_dir))


def run_contenders(label: str, run_dir: Path) -> list[Contender]:
    """Every snapshot of every adapter of one run, then its final adapters, in (step, adapter) order."""
    run = load_resolved(run_dir)
    folder = RunFolder(run_dir)
    found = {
        (step, name): folder.snapshot(step, name)
        for step in folder.snapshot_steps()
        for name in folder.snapshot_adapters(step)
    }
    last = final_step(run_dir)
    names = run.adapters or sorted(p.name for p in folder.adapters.glob("*") if p.is_dir())
    for name in names:
        if (last, name) not in found and folder.adapter(name).is_dir():
            found[last, name] = folder.adapter(name)
    return [Contender(Player(label, name, step), path, run) for (step, name), path in sorted(found.items())]


def training_seats(contenders: Sequence[Contender]) -> dict[str, str]:
    """``run:adapter`` -> the seat it trained in (``drafter``, ``challenger``, or ``both``), read
    from its run's algorithm over the steps it trained: the ratings' swapped-seat check."""
    from agon_env.algorithms.registry import get_algorithm

    seats: dict[str, set[str]] = {}
    for c in contenders:
        plugin = get_algorithm(c.run.algo).mirrored(c.run.config.first_drafter)
        for step in range(max(1, c.player.step)):
            for role, adapter in plugin.updates(step).items():
                if adapter == c.player.adapter:
                    seats.setdefault(f"{c.player.run}:{adapter}", set()).add(role)
    return {key: roles.pop() if len(roles) == 1 else "both" for key, roles in sorted(seats.items())}


def league_contenders(runs: Sequence[tuple[str, Path]]) -> list[Contender]:
    """The players of ``runs`` (``(label, run folder)``), refusing adapters of different bases or
    envs, two runs under one label, and a league of fewer than two players, each in one line."""
    labels = [label for label, _ in runs]
    if len(set(labels)) < len(labels):
        raise LeagueError(f"two runs share a label in {labels}: give each run folder its own name")
    players = [c for label, path in runs for c in run_contenders(label, Path(path))]
    for what, of in (("bases", lambda r: r.config.model.name), ("envs", lambda r: r.config.env.id)):
        seen: dict[str, str] = {}
        for c in players:
            seen.setdefault(of(c.run), c.player.run)
        if len(seen) > 1:
            listed = ", ".join(f"{run} on {value}" for value, run in seen.items())
            raise LeagueError(
                f"agon league: adapters of different {what} cannot play one league ({listed}); "
                "play each one's runs in a league of their own"
            )
    if len(players) < 2:
        raise LeagueError(
            f"agon league: {len(players)} player(s) in {[str(p) for _, p in runs]}: a league needs two; "
            "train with --snapshot-every K, or give more runs"
        )
    return players
