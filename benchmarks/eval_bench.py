"""``agon eval`` of one run, old sampling path against new, in one invocation: time and sameness.

Issue #23 asks for an evaluation of the default run (every method, the same problems) at half
its former time, "in one run against the old code". The levers that change only how samples
are computed have an ``agon eval`` switch, so both sides run here as child processes of this
one invocation, in alternating order rep by rep (load drift hits both alike), never reading
the base sample cache (``--no-cache``: the second would reuse the first's samples):

* **new**: ``agon eval RUN`` as it is;
* **old**: the same with ``--no-prefix-attention`` (a sampling batch's shared prompt prefix
  copied into every row's cache, as before issue #23).

It reports each side's wall seconds, peak RSS and per-method seconds (from each ``eval.json``), the
ratio new ÷ old, and whether the two reports' outcomes agree problem by problem (they should,
up to the rare token that float round-off flips).

    agon train --steps 2 --heldout-problems 0 --time-budget-min 0 --out-dir runs/eval-bench
    python benchmarks/eval_bench.py runs/eval-bench [--reps 1] [--threads 2] [-- EVAL FLAGS]

Last line: one JSON object (``new_over_old``; ``outcomes_equal``; per-method ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from vs_trl import run_child  # a sibling file: this folder is on sys.path

SIDES = {"new": [], "old": ["--no-prefix-attention"]}


def run_side(run: str, flags: list[str], out: Path) -> tuple[float, float]:
    """One ``agon eval`` child: (wall seconds, its peak RSS in MB), by ``vs_trl.run_child``."""
    cmd = [sys.executable, "-m", "agon_env.cli", "eval", run, "--no-cache", "--quiet", "--out", str(out)]
    wall, peak, _ = run_child([*cmd, *flags], out.with_suffix(".log"))
    return wall, peak


def outcomes(report: dict[str, Any]) -> dict[str, list[Any]]:
    """Each method's per-(seed, problem) correctness and trace length, in the report's order."""
    out = {}
    for method, record in report["runs"][0]["methods"].items():
        episodes = record.get("episodes") or []
        out[method] = [(e.get("correct"), e.get("tokens")) for e in episodes]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a run folder (agon train --out-dir)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args, rest = ap.parse_known_args()  # everything after ``--`` goes to agon eval
    args.eval_flags = [x for x in rest if x != "--"]
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the children's torch threads (agon eval has no flag)
    seconds: dict[str, list[float]] = {k: [] for k in SIDES}
    peaks: dict[str, float] = {k: 0.0 for k in SIDES}
    methods: dict[str, dict[str, float]] = {k: {} for k in SIDES}
    reports: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="eval-bench-") as tmp:
        for rep in range(args.reps):
            for side in list(SIDES) if rep % 2 == 0 else list(SIDES)[::-1]:
                out = Path(tmp) / f"{side}-{rep}"
                wall, peak = run_side(args.run, [*SIDES[side], *args.eval_flags], out)
                seconds[side].append(wall)
                peaks[side] = max(peaks[side], peak)
                reports[side] = json.loads((out / "eval.json").read_text())
                for m, rec in reports[side]["runs"][0]["methods"].items():
                    methods[side][m] = methods[side].get(m, 0.0) + float(rec.get("seconds", 0.0))
                print(f"rep {rep} {side}: {seconds[side][-1]:.0f} s", flush=True)
    new, old = sum(seconds["new"]), sum(seconds["old"])
    a, b = outcomes(reports["new"]), outcomes(reports["old"])
    same = {m: sum(x == y for x, y in zip(a[m], b.get(m, []), strict=False)) for m in a}
    result = {
        "bench": "eval",
        "run": args.run,
        "reps": args.reps,
        "threads": args.threads,
        "eval_flags": args.eval_flags,
        "seconds": {k: round(sum(v), 1) for k, v in seconds.items()},
        "new_over_old": round(new / old, 3),
        "peak_rss_mb": {k: round(v) for k, v in peaks.items()},
        "method_seconds": {k: {m: round(s, 1) for m, s in v.items()} for k, v in methods.items()},
        "method_new_over_old": {
            m: round(methods["new"][m] / methods["old"][m], 3)
            for m in methods["new"]
            if methods["old"].get(m)
        },
        "outcomes_agree": {m: f"{same[m]}/{len(a[m])}" for m in a},
        "outcomes_equal": all(a[m] == b.get(m) for m in a),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
