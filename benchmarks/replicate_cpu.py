"""A CPU-scale replication of the paper's main comparison: ``grpo`` vs ``coop`` vs ``agon``.

SmolLM2-135M on ``agon/arith-v0``, every arm trained for the same steps and seeds with the
same knobs, then evaluated by ``agon eval`` on the held-out test split (the trainer only
ever samples the train split): standalone, self-cascade and the cascade whose direction is
chosen on a validation sample disjoint from test, with Clopper–Pearson intervals and trace
lengths, next to the untrained base (zero-shot and MoA). Ends with one Markdown table over
the arms, the accuracy-vs-length figure (``agon plot``) and one JSON line.

The pipeline, each stage a subprocess running the ``agon`` commands themselves:

1. **calibrate** — base zero-shot pass@1 at each candidate difficulty on the task's
   *validation* split (never test), at the evaluation's own sampling settings; the first
   level inside the target band (20–35%) is used, else the one closest to its middle.
   ``--difficulty N`` skips the search but still measures level N.
2. **train** — ``agon train --algo ARM --seed S`` for every arm and seed. A finished run
   (adapters written) is kept; an unfinished one is resumed, so a killed replication
   restarted with the same command continues where it stopped.
3. **eval** — one ``agon eval`` per arm over that arm's seeds (so "across runs" means
   across seeds, never across arms), sharing one on-disk cache of base samples.
4. **report** — ``replication.md`` / ``replication.json`` in ``--out`` and ``agon plot``
   figures in ``--out/plots``.

    nohup python benchmarks/replicate_cpu.py --out runs/replicate-cpu > replicate.log 2>&1 &
    python benchmarks/replicate_cpu.py --quick --out /tmp/rep-quick         # <= 15 min here
    python benchmarks/replicate_cpu.py --quick --model tiny --difficulty 1  # plumbing (test)

Sizes are flags; ``--quick`` only changes their defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CHECKPOINT = "checkpoint.pt"
"""The trainer's checkpoint file name (``agon_env.algorithms.checkpoint.CHECKPOINT``), kept
literal so this parent process never imports torch."""
ARMS = ("grpo", "coop", "agon")
TARGET_BAND = (0.20, 0.35)
"""Base zero-shot pass@1 the issue asks for: the paper's hard regime, yet groups with reward variance."""


@dataclass
class Plan:
    """Every size of one replication; ``--quick`` swaps in the small column."""

    model: str = "smollm2-135m"
    difficulty: int | None = None
    """None = calibrate over ``candidates``."""
    candidates: list[int] = field(default_factory=lambda: [3, 4, 2, 5])
    calibration_problems: int = 100
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    seeds: list[int] = field(default_factory=lambda: [0])
    steps: int = 30
    batch_problems: int = 4
    num_generations: int = 4
    max_new_tokens: int = 48
    temperature: float = 0.7
    lr: float = 2e-4
    threads: int = 1
    """1, not 2: on this shared 2-core machine (load 4–6) a forward pass ran 2–5× slower with two
    torch threads than with one (OpenMP threads waiting on each other); use 2 on a quiet machine."""
    test_problems: int = 150
    val_problems: int = 50
    eval_seeds: list[int] = field(default_factory=lambda: [0])


QUICK = {
    "candidates": [3],
    "calibration_problems": 32,
    "steps": 3,
    "batch_problems": 2,
    "test_problems": 24,
    "val_problems": 8,
}
"""``--quick``: the whole pipeline at the smallest sizes that still give every number."""


# -- running the agon commands ---------------------------------------------------------


def agon_main(argv: list[str]) -> int:
    """``agon`` with train, eval and plot, whether or not this install's ``agon`` lists eval yet."""
    from agon_env.algorithms.cli_train import add_train_parser
    from agon_env.evaluation.cli import add_eval_parser, add_plot_parser

    parser = argparse.ArgumentParser(prog="agon")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (add_train_parser, add_eval_parser, add_plot_parser):
        add(sub)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


class Runner:
    """Runs ``agon ...`` in child processes, logging each to its own file, timing each stage."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.timings: dict[str, float] = {}

    def agon(self, name: str, argv: list[str]) -> None:
        cmd = [sys.executable, __file__, "--agon", *argv]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg"}
        log = self.logs / f"{name}.log"
        say(f"{name}: agon {' '.join(argv)}")
        t0 = time.perf_counter()
        with log.open("w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, check=False).returncode
        self.timings[name] = time.perf_counter() - t0
        if rc != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise SystemExit(f"{name} failed (exit {rc}); see {log}:\n{tail}")
        say(f"{name}: done in {self.timings[name]:.0f} s (load {os.getloadavg()[0]:.1f})")


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sampling_flags(p: Plan, train: bool = False) -> list[str]:
    """The plan's sampling for ``agon eval`` (its own flags) or ``agon train`` (dotted config keys)."""
    prefix = "--sampling." if train else "--"
    return [f"{prefix}temperature", str(p.temperature), f"{prefix}max-new-tokens", str(p.max_new_tokens)]


# -- stages --------------------------------------------------------------------------------


def calibrate(p: Plan, r: Runner, cache: Path) -> tuple[int, dict[int, float]]:
    """Base zero-shot pass@1 per difficulty on the validation split; the level to train at."""
    levels = [p.difficulty] if p.difficulty is not None else p.candidates
    measured: dict[int, float] = {}
    for d in levels:
        out = r.out / "calibration" / f"d{d}"
        if not (out / "eval.json").is_file():
            r.agon(
                f"calibrate-d{d}",
                [
                    "eval",
                    "--model", p.model,
                    "--env", "agon/arith-v0",
                    "--env-kwarg", f"difficulty={d}",
                    # Calibration never looks at test: the choice of level must not be fit to it.
                    "--split", "validation",
                    "--methods", "zero-shot",
                    "--problems", str(p.calibration_problems),
                    "--val-problems", "0",
                    *sampling_flags(p),
                    "--cache-dir", str(cache),
                    "--out", str(out),
                    "--quiet",
                ],
            )  # fmt: skip
        report = json.loads((out / "eval.json").read_text())
        measured[d] = report["runs"][0]["methods"]["zero-shot"]["pass@1"]["rate"]
        say(f"base zero-shot at difficulty {d}: {100 * measured[d]:.1f}%")
        if p.difficulty is None and TARGET_BAND[0] <= measured[d] <= TARGET_BAND[1]:
            return d, measured
    if p.difficulty is not None:
        return p.difficulty, measured
    middle = sum(TARGET_BAND) / 2
    return min(measured, key=lambda d: abs(measured[d] - middle)), measured


def run_dir(p: Plan, out: Path, arm: str, seed: int) -> Path:
    return out / "runs" / f"{arm}-seed{seed}"


def train(p: Plan, r: Runner, difficulty: int) -> None:
    for seed in p.seeds:
        for arm in p.arms:
            folder = run_dir(p, r.out, arm, seed)
            if (folder / "adapters").is_dir():
                say(f"{folder}: finished earlier, kept")
                continue
            # A run killed after its first checkpoint continues; one killed before it starts over.
            resume = ["--resume"] if (folder / CHECKPOINT).is_file() else []
            if not resume and folder.exists():
                shutil.rmtree(folder)
            r.agon(
                f"train-{arm}-seed{seed}",
                [
                    "train",
                    "--algo", arm,
                    "--model", p.model,
                    "--env.kwargs", f"difficulty={difficulty}",
                    "--steps", str(p.steps),
                    "--batch-problems", str(p.batch_problems),
                    "--n", str(p.num_generations),
                    "--lr", str(p.lr),
                    "--seed", str(seed),
                    "--threads", str(p.threads),
                    "--model.device", "cpu",
                    "--no-progress",
                    "--time-budget-min", "0",
                    # Every arm checkpoints as often, so a kill costs each at most 5 steps.
                    "--save-every", "5",
                    "--out-dir", str(folder),
                    *sampling_flags(p, train=True),
                    *resume,
                ],
            )  # fmt: skip


def evaluate(p: Plan, r: Runner, difficulty: int, cache: Path) -> dict[str, dict[str, Any]]:
    reports = {}
    for arm in p.arms:
        out = r.out / "eval" / arm
        if not (out / "eval.json").is_file():
            r.agon(
                f"eval-{arm}",
                [
                    "eval",
                    *[str(run_dir(p, r.out, arm, s)) for s in p.seeds],
                    "--env-kwarg", f"difficulty={difficulty}",
                    "--split", "test",
                    "--problems", str(p.test_problems),
                    "--val-problems", str(p.val_problems),
                    "--seeds", *[str(s) for s in p.eval_seeds],
                    *sampling_flags(p),
                    "--cache-dir", str(cache),
                    "--out", str(out),
                    "--quiet",
                ],
            )  # fmt: skip
        reports[arm] = json.loads((out / "eval.json").read_text())
    return reports


# -- the summary table ---------------------------------------------------------------------


def _pool(per_run: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Pass@1 over runs (seeds): each run's results pooled first, then pooled over runs.

    ``per_run[i]`` lists run i's method results that belong in one cell (e.g. both adapters
    standalone). The interval is Clopper–Pearson on all trials pooled; the spread is over runs,
    so it says how much a seed moves the number.
    """
    from agon_env.evaluation.stats import Rate, pooled, spread

    def pool(entries: list[dict[str, Any]]) -> Rate:
        rates = [Rate(e["pass@1"]["successes"], e["pass@1"]["trials"], 0.0, 1.0) for e in entries]
        return pooled(rates)

    runs = [pool(entries) for entries in per_run if entries]
    flat = [e for entries in per_run for e in entries]
    n = sum(e["pass@1"]["trials"] for e in flat)
    length = sum(e["mean_length"] * e["pass@1"]["trials"] for e in flat) / max(1, n)
    return {
        "pass@1": pooled(runs).to_dict(),
        "spread": spread([r.rate for r in runs if r.rate is not None]).__dict__,
        "mean_length": length,
        "runs": len(runs),
    }


def summarize(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per arm: standalone (both adapters pooled), self-cascade, and the validation-chosen cascade."""
    rows: dict[str, dict[str, Any]] = {}
    base: dict[str, Any] = {}
    for arm, rep in reports.items():
        runs = rep["runs"]
        if not base:  # the untrained base is the same in every arm's report (same cached samples)
            first = runs[0]["methods"]
            base = {k: _pool([[first[k]]]) for k in ("zero-shot", "moa") if k in first}
        cells: dict[str, list[list[dict[str, Any]]]] = {"standalone": [], "self-cascade": [], "cascade": []}
        for run in runs:
            got: dict[str, list[dict[str, Any]]] = {k: [] for k in cells}
            for v in run["methods"].values():
                if v["family"] in ("standalone", "self-cascade"):
                    got[v["family"]].append(v)
                elif v["family"] == "cascade" and v.get("selected"):
                    got["cascade"].append(v)  # only the direction validation chose: never picked on test
            for k in cells:
                cells[k].append(got[k])
        rows[arm] = {k: _pool(v) for k, v in cells.items() if any(v)}
        rows[arm]["chosen"] = [run.get("selection", {}).get("chosen") for run in runs]
        rows[arm]["post_hoc_differs"] = [run.get("selection", {}).get("post_hoc_differs") for run in runs]
        comp = [run.get("complementarity", {}).get("adapters") for run in runs]
        rows[arm]["jaccard"] = [c["jaccard"] for c in comp if c]
    return {"base": base, "arms": rows}


def training_summary(p: Plan, out: Path) -> dict[str, dict[str, float | None]]:
    """Per arm, from each run's metrics.jsonl: drafter accuracy and format rate in the first and
    last fifth of training, challenger accuracy at the end, mean step time and dropped groups."""

    def mean(rows: list[dict[str, Any]], key: str) -> float | None:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    table: dict[str, dict[str, float | None]] = {}
    for arm in p.arms:
        rows = []
        for seed in p.seeds:
            path = run_dir(p, out, arm, seed) / "metrics.jsonl"
            rows += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        window = max(1, p.steps // 5)
        first = [r for r in rows if r["step"] < window]
        last = [r for r in rows if r["step"] >= p.steps - window]
        table[arm] = {
            "drafter_acc_first": mean(first, "acc/drafter"),
            "drafter_acc_last": mean(last, "acc/drafter"),
            "format_first": mean(first, "format/drafter"),
            "format_last": mean(last, "format/drafter"),
            "challenger_acc_last": mean(last, "acc/challenger"),
            "groups_dropped": mean(rows, "groups_dropped"),
            "step_s": mean(rows, "time/step"),
        }
    return table


def training_markdown(table: dict[str, dict[str, float | None]], p: Plan) -> str:
    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.0f}"

    window = max(1, p.steps // 5)
    lines = [
        f"| arm | drafter acc, first {window} → last {window} steps (%) | format rate (%) | "
        "challenger acc, last steps (%) | groups dropped (%) | mean step (s) |",
        "|---|---|---|---|---|---|",
    ]
    for arm, t in table.items():
        step = "–" if t["step_s"] is None else f"{t['step_s']:.0f}"
        lines.append(
            f"| {arm} | {pct(t['drafter_acc_first'])} → {pct(t['drafter_acc_last'])} | "
            f"{pct(t['format_first'])} → {pct(t['format_last'])} | {pct(t['challenger_acc_last'])} | "
            f"{pct(t['groups_dropped'])} | {step} |"
        )
    return "\n".join(lines) + "\n"


def _cell(x: dict[str, Any] | None) -> tuple[str, str, str]:
    if not x:
        return "–", "–", "–"
    r = x["pass@1"]
    pct = f"{100 * r['rate']:.1f}"
    if x["runs"] > 1 and x["spread"].get("std") is not None:
        pct += f" (±{100 * x['spread']['std']:.1f} over {x['runs']} seeds)"
    return pct, f"[{100 * r['low']:.1f}, {100 * r['high']:.1f}]", f"{x['mean_length']:.1f}"


def markdown(summary: dict[str, Any], p: Plan, difficulty: int, measured: dict[int, float]) -> str:
    lines = [
        "| arm | method | pass@1 (%) | 95% CI (%) | mean trace length (tokens) |",
        "|---|---|---|---|---|",
    ]
    for key, label in (("zero-shot", "zero-shot (base)"), ("moa", "MoA (base → base)")):
        if key in summary["base"]:
            lines.append("| untrained | {} | {} | {} | {} |".format(label, *_cell(summary["base"][key])))
    names = {
        "standalone": "standalone (adapters pooled)",
        "self-cascade": "self-cascade (own draft → self)",
        "cascade": "cascade, direction chosen on validation",
    }
    for arm, row in summary["arms"].items():
        for key, label in names.items():
            if key in row:
                lines.append(f"| {arm} | {label} | " + " | ".join(_cell(row[key])) + " |")
    cal = ", ".join(f"d{d}: {100 * v:.1f}%" for d, v in measured.items())
    lines += [
        "",
        f"Model `{p.model}`, `agon/arith-v0` difficulty {difficulty} (base zero-shot on the "
        f"validation split: {cal}); {p.steps} steps × {p.batch_problems} problems × N={p.num_generations}, "
        f"seeds {p.seeds}, T={p.temperature}, {p.max_new_tokens} new tokens, lr {p.lr}. Test: "
        f"{p.test_problems} problems of the held-out test split, eval seeds {p.eval_seeds}; cascade "
        f"direction chosen on {p.val_problems} disjoint validation problems. "
        "Cascade lengths count both turns.",
    ]
    return "\n".join(lines) + "\n"


# -- main ----------------------------------------------------------------------------------


def build_plan(args: argparse.Namespace) -> Plan:
    plan = Plan(**(QUICK if args.quick else {}))
    for f in asdict(plan):
        v = getattr(args, f, None)
        if v is not None:
            setattr(plan, f, v)
    unknown = set(plan.arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"--arms: unknown {sorted(unknown)}; choose from {list(ARMS)}")
    return plan


def main() -> None:
    if sys.argv[1:2] == ["--agon"]:
        sys.exit(agon_main(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/replicate-cpu", help="output folder (re-running continues in it)")
    ap.add_argument("--quick", action="store_true", help="smallest sizes (<= 15 min on 2 cores)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--difficulty", type=int, default=None, help="skip the search; still measured")
    ap.add_argument("--candidates", type=int, nargs="+", default=None, help="difficulties to try, in order")
    ap.add_argument("--calibration-problems", type=int, default=None)
    ap.add_argument("--arms", nargs="+", default=None, help=f"subset of {list(ARMS)}")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="training seeds (each arm, each seed)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--batch-problems", type=int, default=None)
    ap.add_argument("--num-generations", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--temperature", type=float, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--test-problems", type=int, default=None)
    ap.add_argument("--val-problems", type=int, default=None)
    ap.add_argument("--eval-seeds", type=int, nargs="+", default=None)
    args = ap.parse_args()
    plan = build_plan(args)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(asdict(plan), indent=1) + "\n")
    r = Runner(out)
    cache = out / "cache"  # base samples shared by calibration and every arm's eval
    start = time.perf_counter()
    say(f"plan: {json.dumps(asdict(plan))}")
    difficulty, measured = calibrate(plan, r, cache)
    say(f"training at difficulty {difficulty}")
    train(plan, r, difficulty)
    reports = evaluate(plan, r, difficulty, cache)
    summary = summarize(reports)
    r.agon(
        "plot",
        [
            "plot",
            *[str(run_dir(plan, out, a, s)) for s in plan.seeds for a in plan.arms],
            *[x for a in plan.arms for x in ("--eval", str(out / "eval" / a))],
            "--out", str(out / "plots"),
        ],
    )  # fmt: skip
    training = training_summary(plan, out)
    table = markdown(summary, plan, difficulty, measured)
    table += "\nTraining (train split, from metrics.jsonl):\n\n" + training_markdown(training, plan)
    (out / "replication.md").write_text(table)
    seconds = time.perf_counter() - start
    result = {
        "bench": "replicate_cpu",
        "plan": asdict(plan),
        "difficulty": difficulty,
        "calibration": {str(d): v for d, v in measured.items()},
        "summary": summary,
        "training": training,
        "stage_seconds": r.timings,
        "seconds": seconds,
        "figure": str(out / "plots" / "accuracy_vs_length.png"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}",
        "loadavg_end": os.getloadavg(),
    }
    (out / "replication.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table)
    say(f"finished in {seconds / 60:.1f} min; {out / 'replication.md'}, {result['figure']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
