"""The accuracy vs. trace length figure (the paper's Figure 7a) from eval reports.

One point per method and run with the interval its report's table gives
(:func:`agon_env.evaluation.report.method_interval`: the problem-clustered bootstrap with
several seeds, Clopper–Pearson with one); the untrained base's
methods are identical in every report and drawn once, in black; the cascade direction
that validation did not choose is hollow. Labels are placed greedily so coincident
points share one label and close ones do not overprint each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agon_env.evaluation.methods import METHODS
from agon_env.evaluation.report import method_interval
from agon_env.figures import Color, palette, pyplot, save
from agon_env.json_value import JSONRecord
from agon_env.upgrade import method_id

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _short(method_id: str) -> str:
    family, _, rest = method_id.partition(":")
    rest = rest.replace(">", "→").replace("agent_", "")
    return f"{family} {rest}".strip()


def _place_labels(ax: Axes, points: Sequence[tuple[float, float, str, Color]]) -> None:
    """Annotate points in their colour; coincident points share a label, close ones are kept apart.

    Greedy: for each label, try positions right then left of its point, nearest rows first,
    and take the first that stays inside the axes and overlaps no placed label or marker.
    """
    merged: dict[tuple[float, float, Color], list[str]] = {}
    for x, y, text, color in points:
        key = (round(x, 3), round(y, 4), color)
        if text not in merged.setdefault(key, []):
            merged[key].append(text)
    ax.figure.canvas.draw()  # fixes the data -> pixel transform used below
    px_per_char = 0.6 * 8 * ax.figure.dpi / 72  # fontsize 8
    line = 1.4 * 8 * ax.figure.dpi / 72
    box = ax.get_window_extent()
    # Obstacles as pixel boxes (x0, x1, y0, y1): every marker, then every placed label.
    taken = [
        (px - 7, px + 7, py - 7, py + 7) for px, py in (ax.transData.transform((x, y)) for x, y, *_ in points)
    ]

    def free(x0: float, x1: float, y0: float) -> bool:
        y1 = y0 + line
        inside = box.x0 <= x0 and x1 <= box.x1 and box.y0 <= y0 and y1 <= box.y1
        return inside and not any(x0 < b1 and b0 < x1 and y0 < c1 and c0 < y1 for b0, b1, c0, c1 in taken)

    for (x, y, color), texts in sorted(merged.items(), key=lambda kv: -kv[0][1]):
        text = ", ".join(texts)
        width = px_per_char * len(text)
        px, py = ax.transData.transform((x, y))
        rows = [0.0, *(s * k * line for k in range(1, 8) for s in (-1, 1))]
        spots = [(side, dy) for dy in rows for side in (1, -1)]
        side, dy = next(
            (
                (sd, d)
                for sd, d in spots
                if free(
                    px + 8 if sd > 0 else px - 8 - width,
                    px + 8 + width if sd > 0 else px - 8,
                    py - line / 2 + d,
                )
            ),
            (1, 0.0),  # nowhere free: overprint rather than drop the label
        )
        x0 = px + 8 if side > 0 else px - 8 - width
        taken.append((x0, x0 + width, py - line / 2 + dy, py + line / 2 + dy))
        ax.annotate(
            text,
            (x, y),
            textcoords="offset pixels",
            xytext=(8 * side, dy),
            ha="left" if side > 0 else "right",
            va="center",
            fontsize=8,
            color=color,
            arrowprops={"arrowstyle": "-", "color": color, "lw": 0.5, "alpha": 0.5}
            if abs(dy) > line
            else None,
        )


def plot_accuracy_vs_length(reports: Sequence[tuple[str, JSONRecord]], out: Path) -> Path:
    """pass@1 with its interval against mean trace length, per method and report (Figure 7a).

    The untrained base's methods are the same in every report, so they are drawn once, in black.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 6))
    # Several seeds: the tables' problem-clustered interval (report.method_interval).
    entries = [(label, run, len(rep.get("seeds") or ()) > 1) for label, rep in reports for run in rep["runs"]]
    colors = palette(len(entries))
    seen_families: set[str] = set()
    base_done: set[str] = set()
    labels: list[tuple[float, float, str, Color]] = []
    for (label, run, many), color in zip(entries, colors, strict=True):
        name = Path(str(run.get("label", ""))).name or label
        first = True
        for mid, m in run["methods"].items():
            x, r = m.get("mean_length"), m["pass@1"]
            if x is None or r.get("rate") is None:
                continue
            family = METHODS.get(method_id(m.get("family", mid.split(":")[0])))  # old files too
            if family is None:
                continue
            is_base = family.uses_base
            if is_base and mid in base_done:
                continue
            seen_families.add(family.name)
            y = r["rate"]
            ci = method_interval(m, many)
            c = "black" if is_base else color
            # The direction validation did not choose is drawn hollow.
            face = "none" if family.chooses_direction and m.get("selected") is False else c
            legend = (
                "untrained base" if is_base and not base_done else (name if first and not is_base else None)
            )
            ax.errorbar(
                [x],
                [y],
                # A percentile interval can (rarely) miss its point; matplotlib refuses negative bars.
                yerr=[[max(0.0, y - ci["low"])], [max(0.0, ci["high"] - y)]],
                fmt=family.marker,
                color=c,
                mfc=face,
                ms=12 if family.chooses_direction else 8,
                capsize=3,
                lw=1,
                alpha=0.9,
                label=legend,
            )
            if is_base:
                base_done.add(mid)
            else:
                first = False
            labels.append((x, y, _short(mid), c))
    unit = next((m.get("length_unit") for _, run, _ in entries for m in run["methods"].values()), "tokens")
    ax.set_xlabel(f"mean trace length ({unit}, all turns)")
    kinds = sorted({"problem-clustered bootstrap" if many else "Clopper–Pearson" for *_, many in entries})
    level = next((rep.get("confidence") for _, rep in reports if rep.get("confidence")), 0.95)
    ax.set_ylabel(
        f"pass@1 ({100 * level:.0f}% interval: {' / '.join(kinds) or 'Clopper–Pearson'}, as in the tables)"
    )
    ax.set_ylim(-0.03, 1.03)
    xs = [x for x, *_ in labels]
    if xs:
        span = max(xs) - min(xs) or max(xs) or 1.0
        ax.set_xlim(min(xs) - 0.08 * span, max(xs) + 0.25 * span)  # room for labels on the right
    ax.grid(alpha=0.3)
    _place_labels(ax, labels)
    from matplotlib.lines import Line2D

    family_handles = [
        Line2D([], [], marker=f.marker, ls="", color="0.3", label=f.name)
        for f in METHODS.values()
        if f.name in seen_families
    ]
    if entries:
        runs_legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="run")
        ax.add_artist(runs_legend)
        ax.legend(
            handles=family_handles,
            loc="lower left",
            bbox_to_anchor=(1.01, 0.0),
            title="method\n(hollow: cascade direction\nnot chosen on validation)",
        )
    ax.set_title("Accuracy vs. trace length per method (test split)")
    return save(fig, out / "accuracy_vs_length.png")
