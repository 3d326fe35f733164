"""The league's two pictures (matplotlib, PNG), drawn from league.json's figures alone.

``league_matrix.png``
    the cross-play matrix: the cascade's accuracy for each drafter (row) under each challenger
    (column).
``league_ratings.png``
    each adapter's rating over its training steps, one panel per seat, with its interval band.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agon_env.figures import palette, pyplot, save
from agon_env.league.games import Player
from agon_env.vocabulary import ROLES

MATRIX_PNG = "league_matrix.png"
RATINGS_PNG = "league_ratings.png"


def draw_matrix(out: Path, players: Sequence[Player], pairings: Sequence[Mapping[str, Any]]) -> Path:
    """The heatmap of the cascade's accuracy per (drafter, challenger); a blank cell was not played."""
    import numpy as np

    plt = pyplot()
    drafters = sorted({p["drafter"] for p in pairings}, key=[pl.id for pl in players].index)
    challengers = sorted({p["challenger"] for p in pairings}, key=[pl.id for pl in players].index)
    grid = np.full((len(drafters), len(challengers)), np.nan)
    for p in pairings:
        acc = p["accuracy"]["rate"]
        if acc is not None:
            grid[drafters.index(p["drafter"]), challengers.index(p["challenger"])] = 100 * acc
    side = 1.2 + 0.55 * max(len(drafters), len(challengers))
    fig, ax = plt.subplots(figsize=(side + 1.5, side))
    image = ax.imshow(grid, vmin=0.0, vmax=100.0, cmap="viridis")
    for (i, j), value in np.ndenumerate(grid):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.0f}", ha="center", va="center", color="w" if value < 60 else "k")
    ax.set_xticks(range(len(challengers)), challengers, rotation=45, ha="right")
    ax.set_yticks(range(len(drafters)), drafters)
    ax.set_xlabel("challenger")
    ax.set_ylabel("drafter")
    ax.set_title("cascade accuracy (%)")
    fig.colorbar(image, ax=ax, fraction=0.046, label="%")
    return save(fig, out)


def draw_ratings(
    out: Path, players: Sequence[Player], ratings: Mapping[str, Sequence[Mapping[str, Any]]]
) -> Path:
    """Rating against training step per adapter (run, adapter), one panel per seat, 95 % bands."""
    plt = pyplot()
    by_id = {pl.id: pl for pl in players}
    adapters = sorted({(pl.run, pl.adapter) for pl in players})
    colors = dict(zip(adapters, palette(len(adapters)), strict=True))
    fig, axes = plt.subplots(1, len(ROLES), figsize=(5 * len(ROLES), 3.6), sharey=False)
    for ax, seat in zip(axes, ROLES, strict=True):
        for run, adapter in adapters:
            rows = sorted(
                (by_id[r["player"]].step, r["rating"], r["low"], r["high"])
                for r in ratings.get(seat, ())
                if (by_id[r["player"]].run, by_id[r["player"]].adapter) == (run, adapter)
            )
            if not rows:
                continue
            steps, mid, low, high = zip(*rows, strict=True)
            color = colors[(run, adapter)]
            ax.plot(steps, mid, marker="o", color=color, label=f"{run}:{adapter}")
            ax.fill_between(steps, low, high, color=color, alpha=0.2)
        ax.axhline(0.0, color="0.6", lw=0.8)
        ax.set_title(f"as {seat}")
        ax.set_xlabel("training step")
        ax.set_ylabel("rating (Elo points)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    return save(fig, out)
