"""Where a run's metrics go: ``metrics.jsonl``, the trackers, a progress bar, a summary, a plot.

The metrics themselves are computed in :mod:`agon_env.algorithms.metrics` and named in
:mod:`agon_env.metric_names`; this module only writes, tabulates and draws them. Reading them
back is :func:`agon_env.run_folder.read_metrics`, smoothing :func:`agon_env.stats.smoothed` and
the figure set-up :mod:`agon_env.figures`, each shared with ``agon plot``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

from agon_env import metric_names as M
from agon_env.figures import pyplot, save
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import RunFolder, append_lines, read_metrics, read_records
from agon_env.stats import newcombe_interval, smoothed, verdict_of, welch_interval
from agon_env.vocabulary import CHALLENGER, DRAFTER, SEATS

if TYPE_CHECKING:
    from tqdm import tqdm


class MetricsLogger:
    """Writes each step's metrics to ``metrics.jsonl`` and its samples to ``samples.jsonl``, sends
    both to the trackers of ``report_to`` (:mod:`agon_env.algorithms.trackers`: TensorBoard by
    default, wandb, trackio), and drives a progress bar.

    On resume the JSONL files are cut back to the steps before ``start_step`` (a killed run may
    have logged steps its last checkpoint does not cover) and TensorBoard purges them too.
    """

    def __init__(
        self,
        run_dir: Path,
        total_steps: int,
        start_step: int = 0,
        progress: bool = True,
        report_to: Sequence[str] = ("tensorboard",),
        config: Mapping[str, JSONValue] | None = None,
    ) -> None:
        from agon_env.algorithms.trackers import open_trackers

        self.run_dir = run_dir
        folder = RunFolder(run_dir)
        self.path = folder.metrics
        self.samples_path = folder.samples
        kept: list[JSONRecord] = []
        if self.path.exists():  # read back by the one reader, so a killed run's torn line goes too
            kept = [r for r in read_metrics(run_dir) if r["step"] < start_step]
            _replace(self.path, [json.dumps(r) for r in kept])
        _truncate(self.samples_path, start_step)
        self.trackers = open_trackers(report_to, run_dir, config or {}, start_step)
        if start_step:  # a resumed tracker run may lack steps a kill kept from it
            for tracker in self.trackers:
                tracker.catch_up(kept)
        self.bar: tqdm | None = None
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total_steps, initial=start_step, desc="train", unit="step")

    def log(
        self, step: int, metrics: dict[str, float], samples: Sequence[Mapping[str, JSONValue]] = ()
    ) -> None:
        """One step: its metrics, and a few rendered prompts and completions (``samples.jsonl``)."""
        from agon_env.algorithms.trackers import finite_scalars

        if samples:  # whole lines or none: a full disk leaves no half line, and names the file
            append_lines(self.samples_path, (json.dumps({"step": step, **s}) for s in samples))
        record = {"step": step, **{k: _finite(v) for k, v in metrics.items()}}
        append_lines(self.path, [json.dumps(record)])
        scalars = finite_scalars(metrics)
        for tracker in self.trackers:
            tracker.log(step, scalars, samples)
        if self.bar is not None:
            shown = {k: metrics[k] for k in _BAR_KEYS if k in metrics}
            self.bar.set_postfix({k.split("/")[-1] if "/" in k else k: f"{v:.2f}" for k, v in shown.items()})
            self.bar.update(1)

    def warn(self, step: int, text: str) -> None:
        """A loud warning about the run (it is not learning) after the step logged as ``step``:
        on stderr (the run's log) and in each tracker that shows text (TensorBoard's text tab)."""
        message = f"agon train: WARNING after step {step + 1}: {text}"
        if self.bar is not None:
            self.bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr, flush=True)
        for tracker in self.trackers:
            tracker.warn(step, text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        for tracker in self.trackers:
            tracker.close()


_BAR_KEYS = (
    M.key(M.ACC, DRAFTER),
    M.key(M.ACC, CHALLENGER),
    M.key(M.FORMAT, DRAFTER),
    M.GROUPS_DROPPED,
    M.TOKENS_PER_S,
)


def _truncate(path: Path, start_step: int) -> None:
    """Cut ``samples.jsonl`` back to the steps before ``start_step`` (a resumed run)."""
    if path.exists():  # a cut last line (a kill, a full disk) goes; a damaged earlier one is refused
        _replace(path, [json.dumps(r) for r in read_records(path) if r["step"] < start_step])


def _replace(path: Path, lines: list[str]) -> None:
    """Write ``lines`` as ``path`` whole (a temporary file, then a rename: never half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(ln + "\n" for ln in lines))
    tmp.replace(path)


def _finite(v: JSONValue) -> JSONValue:
    # JSON has no NaN; a skipped update's loss is logged as null.
    return None if isinstance(v, float) and not math.isfinite(v) else v


SUMMARY_KEYS = (
    *(M.key(q, role) for q in (M.REWARD, M.ACC, M.FORMAT) for role in (DRAFTER, CHALLENGER)),
    M.CONVERSION,
    M.DRAFT_UNUSABLE,
    M.SUMMARY_LEAK,
    M.SCORE_ERRORS,
    M.SCORE_TIMEOUTS,
    *(M.key(M.WIN, seat) for seat in SEATS),
    M.CHALLENGE_CHANGED_ANSWER,
    M.KL,
    *(M.key(q, role) for q in (M.LEN_TOKENS, M.TRUNCATED) for role in (DRAFTER, CHALLENGER)),
    M.GROUPS_DROPPED,
    M.NAN_SKIPPED,
    M.TOKENS_PER_S,
    M.TIME_STEP,
)
"""What the end-of-run table shows, in order."""


def summary_rows(records: list[JSONRecord], window: int = 3) -> list[tuple[str, str, str, str, str]]:
    """``(metric, start, end, change, verdict)``: means over the first and last ``window`` steps,
    the change with its 95 % interval, and whether it stands out from the noise.

    A rate (:func:`~agon_env.metric_names.is_rate`) is judged on its counts pooled over each
    window: Newcombe's interval for a difference of proportions
    (:func:`~agon_env.stats.newcombe_interval`), always inside [−1, 1]. It takes every outcome
    as independent, which the turns of one problem's group are not, so read it as a lower bound
    on the noise. Start and end are then the pooled shares, and a window whose steps give the
    rate no outcome at all leaves "too few steps" in words. Any other metric (reward, tokens,
    KL, seconds) gets Welch's interval over the per-step values (steps as the independent
    units), or "too few steps" with fewer than 2 steps a side. A change whose interval holds 0
    is labelled "within noise", and "no change" where every outcome or value is the same on
    both sides (a rate at 0 or 1 on both: its interval is wide on few outcomes, yet none moved).
    """
    rows = []
    head, tail = records[:window], records[-window:]
    for key in SUMMARY_KEYS:
        a = [r[key] for r in head if r.get(key) is not None]
        b = [r[key] for r in tail if r.get(key) is not None]
        if not (a or b):
            continue
        start, end = (f"{mean(v):.3f}" if v else "-" for v in (a, b))
        if M.is_rate(key):
            (ka, na), (kb, nb) = (_pooled(part, key) for part in (head, tail))
            if None in (na, nb):  # a log from before the counts were written
                rows.append((key, start, end, "no counts logged", "-"))
                continue
            ci = newcombe_interval(int(kb), int(nb), int(ka), int(na)) if na and nb else None
            if na:
                start = f"{ka / na:.3f}"
            if nb:
                end = f"{kb / nb:.3f}"
            diff = kb / nb - ka / na if ci is not None else 0.0
            # Every outcome alike on both sides (all 0 or all 1): unchanged, as equal values are.
            same = ci is not None and ka / na == kb / nb and kb / nb in (0.0, 1.0)
        else:
            ci = welch_interval(b, a)
            diff = mean(b) - mean(a) if ci is not None else 0.0
            same = False  # a zero-width interval says it
        if ci is None:
            rows.append((key, start, end, "too few steps", "-"))
            continue
        lo, hi = ci
        change = f"{diff:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        rows.append((key, start, end, change, verdict_of(lo, hi, "up", "down", same)))
    return rows


def _pooled(records: list[JSONRecord], key: str) -> tuple[float | None, float | None]:
    """A rate's successes and trials summed over ``records`` (``None`` if a step with the rate
    logged no counts)."""
    ks, ns = M.successes_key(key), M.trials_key(key)
    rows = [r for r in records if r.get(key) is not None]
    if any(r.get(ns) is None or r.get(ks) is None for r in rows):
        return None, None
    return sum(r[ks] for r in rows), sum(r[ns] for r in rows)


def print_summary(run_dir: Path, window: int | None = None, notes: Sequence[str] = ()) -> None:
    """Start vs end of the run; ``window`` steps are averaged at each end; ``notes`` (a warning
    such as "not learning") are the table's caption, in bold, so it cannot be read without them.

    The default window is a quarter of the run (at least 3 steps): on small per-step
    batches a single step's rates move by ±0.15 from sampling noise alone, and the change
    column says which movements are larger than that noise.
    """
    from rich.console import Console
    from rich.table import Table

    records = read_metrics(run_dir)
    if not records:
        return
    n = min(window or max(3, len(records) // 4), max(1, len(records) // 2))
    table = Table(
        title=f"{run_dir}: {len(records)} steps (mean of first / last {n})",
        caption="\n".join(f"WARNING: {note}" for note in notes) or None,
        caption_style="bold red",
        caption_justify="left",
    )
    table.add_column("metric")
    table.add_column("start", justify="right")
    table.add_column("end", justify="right")
    table.add_column("end − start [95% CI]", justify="right")
    table.add_column("verdict")
    for row in summary_rows(records, n):
        table.add_row(*row)
    console = Console()
    Console(width=None if console.is_terminal else 120).print(table)  # a log file: no wrapped cells


def plot(run_dir: Path) -> Path | None:
    """``curves.png``: reward and accuracy/format per step, per role, smoothed with a noise band."""
    records = read_metrics(run_dir)
    if not records:
        return None
    fig, axes = pyplot().subplots(1, 2, figsize=(12, 4.2))
    steps = [r["step"] for r in records]
    width = max(3, len(records) // 6) | 1  # odd, so the window is centred
    panels = (("reward", (M.REWARD,)), ("accuracy / format rate", (M.ACC, M.FORMAT)))
    for ax, (title, prefixes) in zip(axes, panels, strict=True):
        keys = [M.key(q, role) for q in prefixes for role in (DRAFTER, CHALLENGER)]
        keys = [k for k in keys if any(k in r for r in records)]
        for k in keys:
            ys = [r.get(k) for r in records]
            (raw,) = ax.plot(steps, [math.nan if y is None else y for y in ys], "o", ms=2.5, alpha=0.35)
            m, lo, hi = smoothed(ys, width)
            ax.plot(steps, m, color=raw.get_color(), label=k)
            ax.fill_between(steps, lo, hi, color=raw.get_color(), alpha=0.15, linewidth=0)
        ax.set_title(f"{title} (dots: steps; line: mean of {width}; band: its 95% interval)", fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if keys:
            ax.legend(fontsize=8)
    path = RunFolder(run_dir).curves
    try:
        return save(fig, path)
    except OSError as exc:  # matplotlib's write on a full disk names no file: name it
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
