"""Agon ÷ GRPO on one workload, in a few minutes: step time and peak memory of the pair.

``agon train --algo grpo`` and ``--algo agon`` on the same workload and seed
(``benchmarks/vs_trl.py``'s ``WORKLOAD``, its command line and its child runner, so
the figures compare with that benchmark's), each in a fresh process, the first step
left out of the means. The paper's claim is that a rival is nearly free; the goals are
``agon_over_grpo <= 2.0`` (the pair plays two turns and trains two adapters) and
``agon_peak_over_grpo_peak <= 1.5``.

    python benchmarks/step_bench.py [--reps 3] [--threads 2] [--model smollm2-135m]

``--reps R`` measures R steps after the warm-up one (``--steps`` is the older spelling of R + 1);
``--reps 1 --threads 2`` finishes in a few minutes on SmolLM2.

``--train KEY=VALUE`` sets a ``TrainConfig`` key in every run; each ``--lever KEY=VALUE`` adds one
more ``--algo agon`` run with that key set, reported as its step time and peak over the plain
Agon run's, measured in the same invocation (how a cost lever is weighed):

    python benchmarks/step_bench.py --reps 1 --lever grpo.micro_batch_tokens=512

Last line: one JSON object with ``agon_over_grpo`` and ``agon_peak_over_grpo_peak`` (and ``levers``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

GOALS = {"agon_over_grpo": 2.0, "agon_peak_over_grpo_peak": 1.5}


def _vs_trl():
    spec = importlib.util.spec_from_file_location("vs_trl", Path(__file__).with_name("vs_trl.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["vs_trl"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _settings(items: list[str], what: str) -> dict[str, Any]:
    from agon_env.config import parse_assignments

    return {k.replace("-", "_"): v for k, v in parse_assignments(items, what).items()}


def main() -> int:
    vs = _vs_trl()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=None, help="measured steps per run (after the warm-up one)")
    ap.add_argument("--steps", type=int, default=4, help="steps per run (the first is left out)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--train", action="append", default=[], help="KEY=VALUE for every run")
    ap.add_argument("--lever", action="append", default=[], help="KEY=VALUE: one more run")
    a = ap.parse_args()
    from agon_env.config import from_dict

    steps = a.reps + 1 if a.reps is not None else a.steps
    given = {"steps": steps, "threads": a.threads, "model.name": a.model}
    w = vs.workload(from_dict({**vs.WORKLOAD, **given}))
    common = _settings(a.train, "--train")
    scratch = Path(a.scratch or tempfile.mkdtemp(prefix="agon_step_bench_"))
    scratch.mkdir(parents=True, exist_ok=True)
    plan = {"grpo": ("grpo", common), "agon": ("agon", common)}
    levers = [_settings([item], "--lever") for item in a.lever]
    plan |= {_name(lever): ("agon", {**common, **lever}) for lever in levers}
    runs = {}
    for name, (algo, extra) in plan.items():
        runs[name] = r = vs.run_ours(w, algo, scratch, warmup=1, extra=extra, name=name)
        print(
            f"{name}: step {r['step_s_mean']:.2f} s (rollout {r['rollout_s_mean']:.2f}, "
            f"update {r['update_s_mean']:.2f}), peak RSS {r['peak_rss_mb']:.0f} MB",
            file=sys.stderr,
        )
    g, ag = runs["grpo"], runs["agon"]
    keys = ("step_s_mean", "rollout_s_mean", "update_s_mean", "peak_rss_mb", "reward_mean")
    result = {
        "workload": w,
        "train": common,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()[0]},
        "grpo": {k: g[k] for k in keys},
        "agon": {k: ag[k] for k in keys},
        "agon_over_grpo": ag["step_s_mean"] / g["step_s_mean"],
        "agon_peak_over_grpo_peak": ag["peak_rss_mb"] / g["peak_rss_mb"],
        "goals": GOALS,
    }
    if levers:
        result["levers"] = {
            name: {
                **{k: r[k] for k in keys},
                "step_over_agon": r["step_s_mean"] / ag["step_s_mean"],
                "peak_over_agon": r["peak_rss_mb"] / ag["peak_rss_mb"],
            }
            for name, r in runs.items()
            if name not in ("grpo", "agon")
        }
    result["met"] = {k: result[k] <= v for k, v in GOALS.items()}
    print(json.dumps(result))
    return 0


def _name(lever: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in lever.items())


if __name__ == "__main__":
    sys.exit(main())
