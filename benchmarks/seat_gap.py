"""agent_a vs agent_b alone in the CPU replication: per run, per seed, and the schedule's LR.

Reads the per-problem outcome lists of ``docs/results/replication_cpu.json`` and prints, per
pair run, both adapters' standalone pass@1, the problems only one of them solved with an
exact McNemar p, then how likely a gap at least this one-sided is if the seat labels were
exchangeable (every labelling flipped: per run, and per seed with coop and agon of one
seed flipped together, since they share init, problems and sampling seeds), and the sum of
LR multipliers over each seat's drafting steps under the run's schedule.

    python benchmarks/seat_gap.py [docs/results/replication_cpu.json [docs/results/seat_gap_bfirst.json]]

The second file is the decisive run: one recorded pair run retrained with the role schedule
handed to agent_b (``--first-drafter agent_b``), evaluated on the same test problems. If the
gap follows the schedule, b leads there; if it follows the seat's seeds, a still leads by as
much; if it is the run's own training noise, neither.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path

PAIRS = ("coop", "agon")


def mcnemar(only_a: int, only_b: int) -> float:
    """Exact two-sided p of ``only_a`` vs ``only_b`` discordant problems."""
    n, k = only_a + only_b, min(only_a, only_b)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def flip_p(gaps: dict[tuple[str, str], float], groups: list[list[tuple[str, str]]]) -> float:
    """Share of sign flips (one sign per group) whose summed gap is at least the observed one."""
    observed = sum(gaps.values())
    flips = list(itertools.product((1, -1), repeat=len(groups)))
    totals = [sum(s * gaps[k] for s, g in zip(signs, groups, strict=True) for k in g) for signs in flips]
    hits = sum(t >= observed - 1e-9 for t in totals)
    return hits / len(flips)


def lr_multiplier(step: int, steps: int, warmup_ratio: float = 0.1) -> float:
    """``agon_env.algorithms.schedules.lr_lambda(steps, warmup_ratio, "linear")``, restated so
    this script needs no torch."""
    warm = round(warmup_ratio * steps)
    return (step + 1) / (warm + 1) if step < warm else max(0.0, (steps - step) / max(1, steps - warm))


def mirrored(path: str, arms: dict) -> None:
    """The run with the schedule handed to agent_b, against the recorded run it mirrors: each
    run's gap, then each adapter against itself across the two runs (same problems)."""
    doc = json.loads(Path(path).read_text())
    orig = arms[doc["arm"]][doc["seed"]]["outcomes"]
    for k in ("standalone:agent_a", "standalone:agent_b"):
        x, y = orig[k], doc["outcomes"][k]
        before, after = (
            sum(p > q for p, q in zip(x, y, strict=True)),
            sum(q > p for p, q in zip(x, y, strict=True)),
        )
        p = mcnemar(before, after)
        print(f"{k}: {100 * (sum(y) - sum(x)) / len(x):+.1f} pp when b drafts first "
              f"(only before {before}, only after {after}, McNemar p = {p:.3f})")  # fmt: skip
    for label, outs in (("recorded (a drafts first)", orig), ("schedule handed to b", doc["outcomes"])):
        a, b = outs["standalone:agent_a"], outs["standalone:agent_b"]
        only_a = sum(x > y for x, y in zip(a, b, strict=True))
        only_b = sum(y > x for x, y in zip(a, b, strict=True))
        rates = f"a {100 * sum(a) / len(a):.1f} %  b {100 * sum(b) / len(b):.1f} %"
        print(
            f"{doc['arm']} s{doc['seed']} {label}: {rates}  "
            f"gap {100 * (sum(a) - sum(b)) / len(a):+.1f} pp  only a {only_a}  only b {only_b}  "
            f"McNemar p = {mcnemar(only_a, only_b):.3f}"
        )


def main(path: str = "docs/results/replication_cpu.json", mirror: str | None = None) -> None:
    data = json.loads(Path(path).read_text())
    arms, steps = data["outcomes"]["arms"], int(data["plan"]["steps"])
    gaps: dict[tuple[str, str], float] = {}
    for arm in PAIRS:
        for seed, run in sorted(arms.get(arm, {}).items()):
            a, b = run["outcomes"]["standalone:agent_a"], run["outcomes"]["standalone:agent_b"]
            only_a = sum(x > y for x, y in zip(a, b, strict=True))
            only_b = sum(y > x for x, y in zip(a, b, strict=True))
            gaps[arm, seed] = 100 * (sum(a) - sum(b)) / len(a)
            print(
                f"{arm} s{seed}: a {100 * sum(a) / len(a):.1f} %  b {100 * sum(b) / len(b):.1f} %  "
                f"gap {gaps[arm, seed]:+.1f} pp  only a {only_a}  only b {only_b}  "
                f"McNemar p = {mcnemar(only_a, only_b):.3f}"
            )
    seeds = sorted({s for _, s in gaps})
    print(f"mean gap {sum(gaps.values()) / len(gaps):+.2f} pp over {len(gaps)} runs")
    print(f"labels flipped per run: p = {flip_p(gaps, [[k] for k in gaps]):.3f}")
    per_seed = [[(arm, s) for arm in PAIRS if (arm, s) in gaps] for s in seeds]
    print(f"labels flipped per seed (coop and agon together): p = {flip_p(gaps, per_seed):.3f}")
    for seat, first in (("agent_a", 0), ("agent_b", 1)):
        total = sum(lr_multiplier(t, steps) for t in range(first, steps, 2))
        print(f"{seat} drafts at steps {first}, {first + 2}, ...: LR multipliers sum to {total:.3f}")
    if mirror is not None:
        mirrored(mirror, arms)


if __name__ == "__main__":
    main(*sys.argv[1:])
