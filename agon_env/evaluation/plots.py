"""``agon plot``: figures from run folders and eval reports (matplotlib, Agg backend, PNG).

Four figures, each overlaying any number of runs (e.g. ``agon``, ``coop``, ``grpo``):

``accuracy_vs_length.png``
    pass@1 (with its interval) against mean trace length per method, from eval reports
    (the paper's Figure 7a): what each method buys per generated token
    (:mod:`agon_env.evaluation.tradeoff`).
``training_curves.png``
    accuracy per adapter over training steps, per role.
``win_conversion.png``
    each model's win rate and the conversion rate over steps (does either dominate?).
``trace_length.png``
    mean completion length in tokens over steps, per role.

Training metrics come from the run folder's ``metrics.jsonl``, under the names
:mod:`agon_env.metric_names` defines (imported here, so there is one spelling);
a figure with no matching key says so on its panel instead of failing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agon_env import metric_names as M
from agon_env.errors import InputError
from agon_env.evaluation.errors import NoMetricsError
from agon_env.evaluation.report_file import read_eval_report
from agon_env.figures import Color, palette, pyplot, save
from agon_env.json_value import JSONRecord
from agon_env.run_folder import EVAL, EVAL_REPORT, RunFolder, load_run_config, read_metrics
from agon_env.stats import smoothed
from agon_env.vocabulary import ROLES, SEATS

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass
class Run:
    label: str
    folder: Path
    records: list[JSONRecord]

    def keys(self) -> set[str]:
        return {k for r in self.records for k in r}

    def find(self, quantity: str, *qualifiers: str) -> str | None:
        """The metric ``key(quantity, *qualifiers)`` when this run logged it."""
        key = M.key(quantity, *qualifiers)
        return key if key in self.keys() else None

    def series(self, key: str) -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for i, r in enumerate(self.records):
            v = r.get(key)
            if isinstance(v, (int, float)) and math.isfinite(v):
                xs.append(float(r.get("step", i)))
                ys.append(float(v))
        return xs, ys


def load_run(folder: str | Path, label: str | None = None) -> Run:
    """A run folder's ``metrics.jsonl`` (:func:`~agon_env.run_folder.read_metrics`: a killed run's
    torn last line is skipped); fail with one line when there is none."""
    folder = Path(folder)
    path = RunFolder(folder).metrics
    if not folder.is_dir():
        raise NoMetricsError(f"{folder}: no such run folder")
    if not path.is_file():
        raise NoMetricsError(
            f"{folder} has no metrics.jsonl: not a training run folder (agon train writes one per step), "
            "or the run has not finished its first step"
        )
    records = read_metrics(folder)
    if not records:
        raise NoMetricsError(f"{path} is empty: the run has no completed step yet")
    return Run(label or _run_label(folder), folder, records)


def _run_label(folder: Path) -> str:
    if RunFolder(folder).config.is_file():
        try:
            algo = load_run_config(folder).algo
        except Exception:  # a label is cosmetic; never fail a plot over it
            algo = None
        if algo and algo not in folder.name:
            return f"{folder.name} ({algo})"
    return folder.name


_LINESTYLES = dict(zip(ROLES, ("-", "--"), strict=True))


def _curve(ax: Axes, run: Run, key: str, color: Color, label: str, window: int, ls: str = "-") -> None:
    xs, ys = run.series(key)
    if not xs:
        return
    if window > 1:
        ax.plot(xs, ys, color=color, alpha=0.2, lw=1, ls=ls)
    ax.plot(xs, smoothed(ys, window)[0], color=color, lw=2, ls=ls, label=label)


def _finish(ax: Axes, title: str, ylabel: str, empty_note: str, unit_interval: bool = True) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_title(title)
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_lines():
        if unit_interval:
            ax.set_ylim(-0.03, 1.03)
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, empty_note, ha="center", va="center", transform=ax.transAxes, color="0.4")


def _window(runs: Sequence[Run], smoothing: int | None) -> int:
    """The smoothing window in steps: odd, so the mean is centred on its step."""
    if smoothing is not None:
        return max(1, smoothing) | 1
    longest = max(len(r.records) for r in runs)
    return max(1, longest // 10) | 1


def plot_training_curves(runs: Sequence[Run], out: Path, smoothing: int | None = None) -> Path:
    plt = pyplot()
    w = _window(runs, smoothing)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    colors = palette(len(runs))
    for ax, seat in zip(axes, SEATS, strict=True):
        for run, color in zip(runs, colors, strict=True):
            for role in ROLES:
                key = run.find(M.ACC, seat, role)
                if key:
                    _curve(ax, run, key, color, f"{run.label}: {role}", w, _LINESTYLES[role])
        _finish(ax, f"{seat}: accuracy per role", "accuracy", f"no accuracy logged for {seat}")
    fig.suptitle(_suptitle("Training accuracy per adapter", w))
    return save(fig, out / "training_curves.png")


def plot_win_conversion(runs: Sequence[Run], out: Path, smoothing: int | None = None) -> Path:
    plt = pyplot()
    w = _window(runs, smoothing)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = palette(len(runs))
    for run, color in zip(runs, colors, strict=True):
        for seat, ls in zip(SEATS, ("-", "--"), strict=True):
            key = run.find(M.WIN, seat)
            if key:
                _curve(axes[0], run, key, color, f"{run.label}: {seat}", w, ls)
        key = run.find(M.CONVERSION)
        if key:
            _curve(axes[1], run, key, color, run.label, w)
    _finish(axes[0], "Win rate (right while the rival is wrong)", "win rate", "no two-model runs to show")
    _finish(
        axes[1], "Conversion: P(challenger right | draft wrong)", "conversion rate", "no conversion logged"
    )
    fig.suptitle(_suptitle("Who wins, and how often the challenger fixes a wrong draft", w))
    return save(fig, out / "win_conversion.png")


def plot_trace_length(runs: Sequence[Run], out: Path, smoothing: int | None = None) -> Path:
    plt = pyplot()
    w = _window(runs, smoothing)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = palette(len(runs))
    for run, color in zip(runs, colors, strict=True):
        for role in ROLES:
            key = run.find(M.LEN_TOKENS, role)
            if key:
                _curve(ax, run, key, color, f"{run.label}: {role}", w, _LINESTYLES[role])
    _finish(ax, _suptitle("Mean completion length", w), "tokens", "no lengths logged", unit_interval=False)
    return save(fig, out / "trace_length.png")


def _suptitle(text: str, window: int) -> str:
    return text + (f" (centred moving mean over {window} steps; raw faint)" if window > 1 else "")


def plot_all(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    reports: Sequence[str | Path] = (),
    smoothing: int | None = None,
) -> list[Path]:
    """Every figure the inputs allow; eval reports found in ``<run>/eval/`` are used too."""
    out = Path(out)
    runs = [load_run(d) for d in run_dirs]
    written = []
    if runs:
        written += [
            plot_training_curves(runs, out, smoothing),
            plot_win_conversion(runs, out, smoothing),
            plot_trace_length(runs, out, smoothing),
        ]
    report_paths = [Path(p) for p in reports]
    report_paths += [
        RunFolder(r.folder).eval_report for r in runs if RunFolder(r.folder).eval_report.is_file()
    ]
    loaded = []
    for p in dict.fromkeys(report_paths):
        label = p.parent.parent.name if p.name == EVAL_REPORT and p.parent.name == EVAL else p.stem
        loaded.append((label, read_eval_report(p).document))
    if loaded:
        from agon_env.evaluation.tradeoff import plot_accuracy_vs_length

        written.append(plot_accuracy_vs_length(loaded, out))
    if not written:
        raise InputError("nothing to plot: give run folders (with metrics.jsonl) and/or eval reports")
    return written
