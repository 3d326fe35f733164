"""The registered decision rule against standard tests for clustered paired 0/1 outcomes: type I
error at zero difference and the difference each detects with 80 % power, on simulated studies
(:mod:`agon_env.study.power`: Beta problem rates with ICC 0.5, 2 pp of luck per arm × seed).

Rules (each two-sided at the design's confidence, "better" counted for power):

* ``registered`` -- the study's rule: paired bootstrap over seeds and problems, every seed's sign,
  ≥ 6 discordant pairs (:func:`agon_env.study.power.registered_rule`);
* ``mcnemar`` -- exact McNemar (sign) test on every seed × problem pair, as if independent;
* ``problem-t`` -- paired t over problems of each problem's mean difference across seeds;
* ``problem-bootstrap`` -- percentile bootstrap over problems alone of the same means;
* ``seed-t`` -- t over seeds of each seed's mean difference (S − 1 degrees of freedom).

    python benchmarks/rule_power.py             # one design, quick (< 30 s); one JSON line
    python benchmarks/rule_power.py --measure   # every default design: the table in docs/studies.md

Prints a markdown table, then one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from agon_env.study.power import (
    DRAWS,
    Design,
    Rule,
    counts,
    detectable,
    noise,
    registered_rule,
    rejections,
)


def _signed(significant: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    return np.where(significant, np.sign(estimate), 0).astype(int)


def mcnemar(first: np.ndarray, second: np.ndarray, confidence: float, every_seed: bool) -> np.ndarray:
    """Exact two-sided McNemar test on all S × N pairs pooled (seeds taken as independent)."""
    from scipy.stats import binom

    d = (first.astype(np.int16) - second).reshape(first.shape[0], -1)
    b, c = (d > 0).sum(axis=1), (d < 0).sum(axis=1)
    p = np.minimum(1.0, 2 * binom.cdf(np.minimum(b, c), b + c, 0.5))
    return _signed((b + c > 0) & (p < 1 - confidence), b - c)


def _t(values: np.ndarray, confidence: float) -> np.ndarray:
    """Two-sided one-sample t test of mean 0 along axis 1, signed by the mean."""
    from scipy.stats import t

    m, sd, n = values.mean(axis=1), values.std(axis=1, ddof=1), values.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(sd > 0, m / (sd / np.sqrt(n)), 0.0)
    return _signed(np.abs(stat) > t.ppf(0.5 + confidence / 2, n - 1), m)


def problem_t(first: np.ndarray, second: np.ndarray, confidence: float, every_seed: bool) -> np.ndarray:
    """Paired t over problems: each problem's difference averaged over seeds is one observation."""
    return _t((first.astype(float) - second).mean(axis=1), confidence)


def seed_t(first: np.ndarray, second: np.ndarray, confidence: float, every_seed: bool) -> np.ndarray:
    """t over seeds: each seed's mean difference is one observation."""
    return _t((first.astype(float) - second).mean(axis=2), confidence)


def problem_bootstrap(
    first: np.ndarray, second: np.ndarray, confidence: float, every_seed: bool, reps: int = 4000
) -> np.ndarray:
    """Percentile bootstrap over problems (not seeds) of the per-problem mean differences."""
    per_problem = (first.astype(float) - second).mean(axis=1)
    n = per_problem.shape[1]
    weights = counts(np.random.default_rng(0).integers(0, n, size=(reps, n)), n)
    boot = per_problem @ weights.T / n
    alpha = (1 - confidence) / 2
    low, high = np.quantile(boot, [alpha, 1 - alpha], axis=1)
    return np.where(low > 0, 1, np.where(high < 0, -1, 0))


RULES: dict[str, Rule] = {
    "registered": registered_rule,
    "mcnemar": mcnemar,
    "problem-t": problem_t,
    "problem-bootstrap": problem_bootstrap,
    "seed-t": seed_t,
}
QUICK = [Design(3, 300, 0.3)]
DESIGNS = [Design(2, 16, 0.3), Design(2, 16, 0.5)] + [
    Design(s, n, p) for s, n in ((3, 100), (3, 300), (5, 300)) for p in (0.3, 0.5)
]


def measure(design: Design, draws: int, null_draws: int) -> dict[str, Any]:
    """Each rule's type I error (``null_draws`` studies at 0), its 80 % detectable difference, and
    its power at the registered rule's detectable difference (fresh draws, seed 1)."""
    null = noise(design, null_draws, seed=2)
    search, fresh = noise(design, draws, seed=0), noise(design, draws, seed=1)
    stated = detectable(design, randomness=search)
    row: dict[str, Any] = {"seeds": design.seeds, "problems": design.problems, "base_rate": design.base_rate}
    row["registered_detectable"] = stated
    for name, rule in RULES.items():
        row[name] = {
            "type_i": float(np.mean(rejections(design, 0.0, null, rule) != 0)),
            "detectable": stated
            if name == "registered"
            else detectable(design, rule=rule, randomness=search),
            "power_at_registered": float(np.mean(rejections(design, stated, fresh, rule) == 1)),
        }
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per design and rule."""
    out = [
        "| seeds × problems | base | rule | type I at 0 | 80 % detectable | power at registered's |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for name in RULES:
            r = row[name]
            found = "none ≤ max" if r["detectable"] >= 1 else f"±{100 * r['detectable']:.1f} pp"
            out.append(
                f"| {row['seeds']} × {row['problems']} | {100 * row['base_rate']:g} % | {name} | "
                f"{100 * r['type_i']:.1f} % | {found} | {100 * r['power_at_registered']:.0f} % |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true", help="every default design, more draws (minutes)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    designs, draws, null_draws = (DESIGNS, DRAWS, 2000) if args.measure else (QUICK, 200, 400)
    rows = [measure(d, draws, null_draws) for d in designs]
    print(table(rows))
    result = {"bench": "rule_power", "draws": draws, "null_draws": null_draws, "rows": rows}
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
