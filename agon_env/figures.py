"""The one figure set-up of the package: matplotlib's backend, fonts, colours and saving.

Every figure uses it: the run's own ``curves.png`` (:func:`agon_env.algorithms.run_log.plot`),
the training figures of ``agon plot`` (:mod:`agon_env.evaluation.plots`), the accuracy-vs-length
figure (:mod:`agon_env.evaluation.tradeoff`) and the replication's figure. It imports nothing of
the package, so both wings use it without one importing the other; matplotlib loads only when a
figure is drawn.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), with the figures' fonts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "legend.fontsize": 8})
    return plt


Color = tuple[float, float, float, float]
"""An RGBA colour, as :func:`palette` gives it."""


def palette(n: int) -> list[Color]:
    """``n`` distinct colours (tab10, cycled): one per run or method."""
    cmap = pyplot().get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG (its folder created) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
