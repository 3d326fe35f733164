"""Do two sets of fixed-seed runs log the same metrics? (A refactor's before/after record.)

``python scripts/same_metrics.py BEFORE AFTER``: BEFORE and AFTER hold one run folder per
plugin (``bash scripts/fixed_seed_runs.sh DIR`` makes them). Every logged metric but the
timings must agree within round-off (absolute 1e-7 or relative 1e-6); exit status 1 if any
does not. Prints one line per plugin and the largest difference among the equal ones.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from agon_env.metric_names import MACHINE as TIMINGS
from agon_env.run_folder import read_metrics


def _equal(u: Any, v: Any) -> bool:
    if isinstance(u, (int, float)) and isinstance(v, (int, float)):
        if math.isnan(u) and math.isnan(v):
            return True
        d = abs(u - v)
        return d <= 1e-7 or d <= 1e-6 * max(abs(u), abs(v))
    return u == v


def compare(before: Path, after: Path) -> tuple[dict[str, list[Any]], float]:
    """Per plugin the differing ``(step, metric, before, after)``; the largest equal difference."""
    worst, out = 0.0, {}
    for algo in sorted(p.name for p in before.iterdir() if p.is_dir()):
        a, b = read_metrics(before / algo), read_metrics(after / algo)
        bad: list[Any] = [("rows", len(a), len(b))] if len(a) != len(b) else []
        for x, y in zip(a, b, strict=False):
            for k in sorted(set(x) | set(y)):
                if k.startswith(TIMINGS):
                    continue
                u, v = x.get(k), y.get(k)
                if not _equal(u, v):
                    bad.append((x.get("step"), k, u, v))
                elif isinstance(u, (int, float)) and isinstance(v, (int, float)) and not math.isnan(u):
                    worst = max(worst, abs(u - v))
        out[algo] = bad
    return out, worst


def main() -> int:
    diffs, worst = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    for algo, bad in diffs.items():
        print(algo, "same" if not bad else f"DIFFERENT: {bad[:5]}")
    print(f"largest difference among equal metrics: {worst:g}")
    return 1 if any(diffs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
