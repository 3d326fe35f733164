"""The decode levers of issue 59's rounds, weighed against each other in one process.

``nucleus``: top-p's cut from the top 64 (then 1,024) probabilities instead of a sort of the
whole vocabulary (:func:`agon_env.agents.logit_rules.nucleus`; off: ``NUCLEUS_TRIES = ()``).
``layout``: merged CPU weights stored input-major (:data:`agon_env.agents.merge.INPUT_MAJOR`).
``head``: the output head run from a oneDNN-packed copy of its weight
(:data:`agon_env.agents.packed_head.PACKED_HEAD`).
``linears``: the large merged weights (the MLP's) run packed the same way
(:data:`agon_env.agents.merge.PACKED_LINEARS`).
Each rep runs every combination (none, each lever alone, all but each, all) on the same prompts
and seed, in a rotating order so drift in a shared machine's load hits each alike, after one
warm-up call with every lever on (before 2026-12-07 evening the warm-up ran every combination:
with four levers the bench then took 9 minutes, a quarter of them the warm-up).
``<lever>_over_none`` is the lever alone ÷ none; ``<lever>_in_all`` is all ÷ all but the lever:
what it buys in the library's default, where the others already shortened the step. The same
rows are checked token for token against the run with every lever off (``same_tokens``: the
nucleus is exact; the layout and the packed products change the round-off, so a token could in
principle flip), and the largest log-prob difference over the rows that agree is reported
(``largest_logprob_difference``).

    python benchmarks/decode_levers_bench.py [--batch 8] [--reps 3] [--max-new-tokens 96] [--threads 1]

Prints one JSON object as its last line: tokens/s of each combination and those ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from agon_env.agents import HFBackend, LoraSpec, SamplingParams, SharedBase, logit_rules, merge, packed_head

LEVERS = {
    "nucleus": lambda on: setattr(logit_rules, "NUCLEUS_TRIES", (64, 1024) if on else ()),
    "layout": lambda on: setattr(merge, "INPUT_MAJOR", on),
    "head": lambda on: setattr(packed_head, "PACKED_HEAD", on),
    "linears": lambda on: setattr(merge, "PACKED_LINEARS", on),
}
"""Each lever's switch (on: the library's default)."""

COMBINATIONS = {
    "none": (),
    **{name: (name,) for name in LEVERS},
    **{f"all_but_{name}": tuple(n for n in LEVERS if n != name) for name in LEVERS},
    "all": tuple(LEVERS),
}
"""The levers each run turns on: none, each alone, all but each, all."""


def switch(on: tuple[str, ...]) -> None:
    for name, set_lever in LEVERS.items():
        set_lever(name in on)


def main() -> None:
    from rollout_bench import make_prompts  # a sibling script, not a package

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base = SharedBase.from_source(args.model)
    base.add_adapter("agent_a", LoraSpec(init_b_std=0.01))
    backend = HFBackend(base)
    prompts = make_prompts(base.tokenizer, args.batch, seed=args.batch)
    totals = {name: [0, 0.0] for name in COMBINATIONS}
    same = {name: True for name in COMBINATIONS}
    drift = {name: 0.0 for name in COMBINATIONS}
    names = list(COMBINATIONS)
    for rep in range(args.reps + 1):
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.7, top_p=0.95, seed=rep)
        if not rep:  # the warm-up: one call, every lever on (the kernels and the allocator warmed)
            switch(tuple(LEVERS))
            backend.generate(prompts, params, adapter="agent_a")
            continue
        outs = {}
        turn = rep % len(names)
        for name in names[turn:] + names[:turn]:
            switch(COMBINATIONS[name])
            t0 = time.perf_counter()
            outs[name] = backend.generate(prompts, params, adapter="agent_a")
            totals[name][0] += sum(len(o.completion_ids) for o in outs[name])
            totals[name][1] += time.perf_counter() - t0
        for name in names:
            for o, ref in zip(outs[name], outs["none"], strict=True):
                same[name] &= o.completion_ids == ref.completion_ids
                if o.completion_ids == ref.completion_ids:
                    diffs = [abs(a - b) for a, b in zip(o.logprobs, ref.logprobs, strict=True)]
                    drift[name] = max(drift[name], *diffs, 0.0)
    switch(tuple(LEVERS))
    tps = {name: n / s for name, (n, s) in totals.items()}
    print(
        json.dumps(
            {
                "bench": "decode_levers",
                "model": args.model,
                "batch": args.batch,
                "reps": args.reps,
                "threads": args.threads,
                "max_new_tokens": args.max_new_tokens,
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                "tok_s": {k: round(v, 2) for k, v in tps.items()},
                **{f"{name}_over_none": round(tps[name] / tps["none"], 3) for name in (*LEVERS, "all")},
                **{f"{name}_in_all": round(tps["all"] / tps[f"all_but_{name}"], 3) for name in LEVERS},
                "same_tokens": same,
                # over the rows whose tokens agree with "none": the round-off a lever moves
                "largest_logprob_difference": {k: float(f"{v:.2e}") for k, v in drift.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
