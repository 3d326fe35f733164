"""The cost of the second stage: the cascade against one adapter alone, and the early-stop lever.

One invocation, one model, the same questions (``agon/arith-v0``'s test split at the run's difficulty),
three ways, interleaved rep by rep (the order rotates) so a noisy shared CPU hurts all alike:

``alone``          the drafting adapter alone (the env's solo mode: ``agon eval``'s standalone row)
``cascade``        draft, then challenge, the draft written to its end (as training samples it)
``cascade_early``  the same with the draft stopped at ``</summary>`` (:class:`agon_env.Cascade`'s
                   default where the channel shows only the summary)

each as one batch of ``--questions`` and as single questions (batch 1: an interactive user's latency).
Per way: wall seconds, tokens per stage, and the ratios cascade ÷ alone and early ÷ full. The lever is
kept only if ``early_over_full`` < 1; ``shown_identical`` counts the questions whose challenger read the
same text with and without it (per-question seeds: the draft's tokens up to ``</summary>`` are the same
sample either way).

    OMP_NUM_THREADS=1 python benchmarks/cascade_bench.py                 # SmolLM2-135M, fresh adapters
    python benchmarks/cascade_bench.py --run runs/agon-seed0 --direction agent_a>agent_b
    python benchmarks/cascade_bench.py --model tiny-qwen3 --device cuda   # scripts/gpu_check.sh

Without ``--run`` a run folder is written to a temp dir: ``--model`` with two fresh LoRA adapters (B = 0:
the base's completions, what a run looks like at step 0). Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import agon_env
from agon_env.registry import with_split
from agon_env.run_folder import load_resolved
from agon_env.serving.cascade import Cascade


def fresh_run(folder: Path, model: str, max_new_tokens: int) -> Path:
    """A run folder as ``agon train`` leaves it at step 0: ``model``, two untrained adapters."""
    from agon_env.agents.adapters import LoraSpec, SharedBase

    base = SharedBase.from_source(model)
    for i, name in enumerate(("agent_a", "agent_b")):
        base.add_adapter(name, LoraSpec(init_seed=i))
        base.save(name, folder / "adapters" / name)
    (folder / "config.yaml").write_text(
        f"algo: agon\nmodel: {{name: {model}}}\nenv: {{id: agon/arith-v0, kwargs: {{difficulty: 2}}}}\n"
        f"sampling: {{max_new_tokens: {max_new_tokens}}}\n"
    )
    return folder


def questions(run_dir: Path, n: int) -> tuple[list[str], list[str]]:
    run = load_resolved(run_dir)
    task = agon_env.make(run.env_id, **with_split(run.env_id, run.task_kwargs, "test")).unwrapped.task
    problems = [task[i] for i in range(min(n, len(task)))]
    return [p.prompt for p in problems], [p.answer for p in problems]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=None, help="a run folder (default: fresh adapters on --model)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--direction", default="agent_a>agent_b")
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--singles", type=int, default=2, help="questions also asked one at a time")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=80, help="without --run: the run's budget")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory(prefix="cascade-bench-")
    run_dir = (
        Path(args.run) if args.run else fresh_run(Path(tmp.name) / "run", args.model, args.max_new_tokens)
    )
    early = Cascade.from_run(run_dir, direction=args.direction, device=args.device, engine="hf")
    full = dataclasses.replace(early, early_stop=False, timings=[])
    qs, refs = questions(run_dir, args.questions)
    drafter = early.direction[0]
    ways = {
        "alone": lambda q, r: early.alone_many(drafter, q),
        "cascade": lambda q, r: full.answer_many(q, references=r),
        "cascade_early": lambda q, r: early.answer_many(q, references=r),
    }
    early.answer_many(qs[:2])  # warm-up: first-call allocations are nobody's cost
    seconds: dict[str, dict[str, list[float]]] = {w: {"batch": [], "single": []} for w in ways}
    last: dict[str, list[Any]] = {}
    stages: dict[str, list[dict[str, float]]] = {"cascade": [], "cascade_early": []}
    for rep in range(args.reps):
        order = list(ways)[rep % 3 :] + list(ways)[: rep % 3]
        for way in order:
            t0 = time.perf_counter()
            last[way] = ways[way](qs, refs)
            seconds[way]["batch"].append(time.perf_counter() - t0)
            if way in stages:
                stages[way].append((full if way == "cascade" else early).timings[-1])
            for q, r in zip(qs[: args.singles], refs[: args.singles], strict=True):
                t0 = time.perf_counter()
                ways[way]([q], [r])
                seconds[way]["single"].append(time.perf_counter() - t0)

    def tokens(items: list[Any], stage: str | None = None) -> float:
        picked = [getattr(i, stage) if stage else i for i in items]
        return statistics.mean(s.completion_tokens for s in picked)

    def median(way: str, kind: str) -> float:
        return statistics.median(seconds[way][kind])

    full_answers, early_answers = last["cascade"], last["cascade_early"]
    result = {
        "bench": "cascade_bench",
        "model": load_resolved(run_dir).config.model.name,
        "run": str(args.run) if args.run else "fresh adapters (step 0)",
        "direction": list(early.direction),
        "device": args.device,
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "questions": len(qs),
        "singles": args.singles,
        "reps": args.reps,
        "seconds_batch": {w: round(median(w, "batch"), 2) for w in ways},
        "seconds_single": {w: round(median(w, "single") / max(1, args.singles), 2) for w in ways},
        "tokens": {
            "alone": round(tokens(last["alone"]), 1),
            "cascade_draft": round(tokens(full_answers, "draft"), 1),
            "cascade_challenge": round(tokens(full_answers, "challenge"), 1),
            "cascade_early_draft": round(tokens(early_answers, "draft"), 1),
            "cascade_early_challenge": round(tokens(early_answers, "challenge"), 1),
        },
        "stage_seconds_batch": {
            way: {k: round(statistics.median(t[k] for t in got), 2) for k in got[0]}
            for way, got in stages.items()
        },
        "cascade_over_alone_batch": round(median("cascade", "batch") / median("alone", "batch"), 2),
        "cascade_over_alone_single": round(median("cascade", "single") / median("alone", "single"), 2),
        "early_over_full_batch": round(median("cascade_early", "batch") / median("cascade", "batch"), 3),
        "early_over_full_single": round(median("cascade_early", "single") / median("cascade", "single"), 3),
        "shown_identical": sum(
            a.challenger_text == b.challenger_text for a, b in zip(full_answers, early_answers, strict=True)
        ),
        "accuracy": {
            "cascade": sum(bool(a.correct) for a in full_answers) / len(qs),
            "cascade_early": sum(bool(a.correct) for a in early_answers) / len(qs),
        },
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
