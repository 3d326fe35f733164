"""The run's start-vs-end table judges a rate's change on its pooled counts (issue 41)."""

from __future__ import annotations

from agon_env.algorithms.run_log import summary_rows


def _step(step: int, **counts: tuple[int, int]) -> dict[str, float]:
    """A metrics.jsonl record with each rate's share and its counts, as the trainer logs them."""
    row: dict[str, float] = {"step": step}
    for name, (k, n) in counts.items():
        key = name.replace("__", "/")
        row[key] = k / n
        row[f"successes/{key}"], row[f"trials/{key}"] = float(k), float(n)
    return row


def _row(rows, key):
    return next(r for r in rows if r[0] == key)


def _interval(change: str) -> tuple[float, float]:
    lo, hi = change[change.index("[") + 1 : change.index("]")].split(",")
    return float(lo), float(hi)


def test_a_rate_seen_on_two_steps_gets_a_bounded_interval_on_its_pooled_counts():
    """The default run printed ``conversion_rate +0.450 [-5.646, +6.546]`` (Welch over two steps).
    Here the rate exists on one step of each window: 1/10 converted, then 11/20. Pooled:
    0.100 → 0.550, and Newcombe's interval for 11/20 − 1/10 (hand-computed from the two Wilson
    intervals, [0.3421, 0.7418] and [0.0179, 0.4042]): +0.450 − √(0.2079² + 0.3042²) = +0.082,
    +0.450 + √(0.1918² + 0.0821²) = +0.659."""
    records = [_step(0, conversion_rate=(1, 10)), _step(1), _step(2), _step(3, conversion_rate=(11, 20))]
    _, start, end, change, verdict = _row(summary_rows(records, window=2), "conversion_rate")
    assert (start, end) == ("0.100", "0.550")
    assert change == "+0.450 [+0.082, +0.659]" and verdict == "up"


def test_every_rate_interval_is_inside_its_bounds_however_few_the_outcomes():
    records = [_step(0, acc__drafter=(0, 1)), _step(1, acc__drafter=(0, 1)), _step(2, acc__drafter=(1, 1))]
    records.append(_step(3, acc__drafter=(1, 1)))
    lo, hi = _interval(_row(summary_rows(records, window=2), "acc/drafter")[3])
    assert -1 <= lo < 1.0 <= hi <= 1  # 0/2 → 2/2: a move of +1, the most a rate can move


def test_a_window_without_the_rate_says_too_few_steps():
    records = [_step(0), _step(1), _step(2, conversion_rate=(3, 4)), _step(3, conversion_rate=(1, 4))]
    assert _row(summary_rows(records, window=2), "conversion_rate")[3:] == ("too few steps", "-")
    # ... and a metric with per-step values needs two steps a side.
    records = [{"step": 0, "reward/drafter": 1.0}, {"step": 1, "reward/drafter": 2.0}]
    assert _row(summary_rows(records, window=1), "reward/drafter")[3:] == ("too few steps", "-")


def test_a_rate_that_did_not_move_reads_no_change_as_an_unchanged_value_does():
    # Issue 58: 0/2 then 0/2 read "within noise [-0.658, +0.658]" where a reward constant over the
    # run read "no change".
    records = [_step(s, acc__drafter=(0, 1)) for s in range(4)]  # 0/2 pooled over each window
    records = [{**r, "reward/drafter": 0.5} for r in records]
    rows = summary_rows(records, window=2)
    assert _row(rows, "acc/drafter")[3:] == ("+0.000 [-0.658, +0.658]", "no change")
    assert _row(rows, "reward/drafter")[4] == "no change"
    every = [_step(s, acc__drafter=(2, 2)) for s in range(4)]
    assert _row(summary_rows(every, window=2), "acc/drafter")[4] == "no change"
    # The same share from varied outcomes is not "no change": 1/2 then 1/2 could hide a move.
    half = [_step(s, acc__drafter=(1, 2)) for s in range(4)]
    assert _row(summary_rows(half, window=2), "acc/drafter")[4] == "within noise"
