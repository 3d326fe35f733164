"""Rows of two adapters decoded in one forward, against one adapter's rows and a batch per adapter.

The HF generation engine (``agents/engine.py``) runs rows of several adapters in one forward: the
base weights once, each row's own LoRA update added (``MergedSet.mix``). Three ways to decode the
same number of rows, each rep in a rotating order so drift in a shared machine's load hits each
alike (rep 0 warms up and is not counted):

``merged``     ``--batch`` rows of one adapter in one call: one merged forward per step (the floor)
``mixed``      half the rows of each of two adapters in one call: one mixed forward per step
``separate``   the same halves as two calls, one after the other: what a batch per adapter cost
               when both ran every step (two forwards per step)

``mixed_over_merged`` is the price of mixing per forward (tokens/s ratio; the goal: close to 1);
``mixed_over_separate`` what it buys over a batch per adapter. ``same_tokens``: each mixed row's
tokens equal that row decoded alone in its adapter's half (``separate``), and
``largest_logprob_difference`` is the round-off between them (``x W + (x A) B`` against
``x (W + B A)``).

    python benchmarks/mixed_forward_bench.py [--batch 12] [--reps 3] [--max-new-tokens 64] [--threads 1]

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from agon_env.agents import HFBackend, LoraSpec, SamplingParams, SharedBase


def main() -> None:
    from rollout_bench import make_prompts  # a sibling script, not a package

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base = SharedBase.from_source(args.model)
    for i, name in enumerate(("agent_a", "agent_b")):
        base.add_adapter(name, LoraSpec(init_seed=i, init_b_std=0.01))
    backend = HFBackend(base)
    prompts = make_prompts(base.tokenizer, args.batch, seed=args.batch)
    half = args.batch // 2
    names = ["agent_a"] * half + ["agent_b"] * (args.batch - half)
    seeds = list(range(args.batch))

    def merged(params: SamplingParams) -> list[list[int]]:
        outs = backend.generate(prompts, params, adapter="agent_a", seeds=seeds)
        return [o.completion_ids for o in outs]

    def mixed(params: SamplingParams) -> list[list[int]]:
        outs = backend.generate(prompts, params, adapter=names, seeds=seeds)
        return [o.completion_ids for o in outs]

    def separate(params: SamplingParams) -> list[list[int]]:
        a = backend.generate(prompts[:half], params, adapter="agent_a", seeds=seeds[:half])
        b = backend.generate(prompts[half:], params, adapter="agent_b", seeds=seeds[half:])
        return [o.completion_ids for o in a + b]

    ways = {"merged": merged, "mixed": mixed, "separate": separate}
    order = list(ways)
    totals = {name: [0, 0.0] for name in ways}
    same, drift = True, 0.0
    for rep in range(args.reps + 1):
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.7, top_p=0.95, seed=rep)
        outs = {}
        for name in order[rep % 3 :] + order[: rep % 3]:
            t0 = time.perf_counter()
            outs[name] = ways[name](params)
            seconds = time.perf_counter() - t0
            if rep:
                totals[name][0] += sum(len(ids) for ids in outs[name])
                totals[name][1] += seconds
        # the log-probs: one more pair of calls, outside the clock
        m = backend.generate(prompts, params, adapter=names, seeds=seeds)
        s = backend.generate(prompts[:half], params, adapter="agent_a", seeds=seeds[:half])
        s += backend.generate(prompts[half:], params, adapter="agent_b", seeds=seeds[half:])
        for x, y in zip(m, s, strict=True):
            same &= x.completion_ids == y.completion_ids
            if x.completion_ids == y.completion_ids:
                drift = max(drift, *(abs(p - q) for p, q in zip(x.logprobs, y.logprobs, strict=True)), 0.0)
    tps = {name: n / s for name, (n, s) in totals.items()}
    print(
        json.dumps(
            {
                "bench": "mixed_forward",
                "model": args.model,
                "batch": args.batch,
                "reps": args.reps,
                "threads": args.threads,
                "max_new_tokens": args.max_new_tokens,
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                "tok_s": {k: round(v, 2) for k, v in tps.items()},
                "mixed_over_merged": round(tps["mixed"] / tps["merged"], 3),
                "mixed_over_separate": round(tps["mixed"] / tps["separate"], 3),
                "same_tokens": same,
                "largest_logprob_difference": float(f"{drift:.2e}"),
            }
        )
    )


if __name__ == "__main__":
    main()
