"""What a shorter challenger prompt would buy: a challenger turn's time with 2, 1 or 0 worked challenges.

Issue #23 lists shorter worked challenges as a lever on the pair's step time and on
``agon eval``'s cascades (whose second turns are most of an evaluation). It changes what the
challenger reads, so it is a product decision that would need held-out pass@1 measured; this
benchmark first measures what it could save at best. The same challenger observations
(``agon/arith``-style problems, each with a drafter-style method summary) are rendered with the
arithmetic family's first K worked challenges and sampled by the HF backend as training samples
them (an adapter merged, T = 0.7, the ``</answer>`` stop, the shared prefix read once), the
variants interleaved rep by rep so load drift hits them alike. Completions differ with the prompt,
so the figures are per turn and per generated token.

    python benchmarks/challenger_prompt_bench.py [--batches 16 32] [--reps 1] [--threads 2]

Last line: one JSON object; ``turn_time_over_two_examples`` per variant and batch is the lever's
ceiling (1 for two examples, today's prompt).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace

import torch
from rollout_bench import observations  # a sibling file: this folder is on sys.path

from agon_env.agents import HFBackend, LoraSpec, SamplingParams, SharedBase, render_prompt
from agon_env.agents.prompt_families import CHALLENGER_EXAMPLES, RolePrompts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument(
        "--batches", type=int, nargs="+", default=[16, 32], help="16: a stream; 32: an eval chunk"
    )
    ap.add_argument("--examples", type=int, nargs="+", default=[2, 1, 0], help="worked challenges shown")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = SharedBase.from_source(args.model)
    base.add_adapter("agent_a", LoraSpec(init_b_std=0.01))
    backend = HFBackend(base)
    tok = base.tokenizer
    results: dict[str, dict] = {}
    for batch in args.batches:
        obs = observations(batch, seed=batch, role="challenger")
        shown = {
            k: replace(RolePrompts(), challenger_examples=CHALLENGER_EXAMPLES[:k]) for k in args.examples
        }
        prompts = {k: [render_prompt(o, tok, shown[k]) for o in obs] for k in args.examples}
        totals = {k: [0.0, 0, 0] for k in args.examples}  # seconds, generated tokens, turns
        warm = SamplingParams(max_new_tokens=2, seed=0)
        backend.generate(prompts[args.examples[0]][:2], warm, adapter="agent_a")  # not timed
        for rep in range(args.reps):
            params = SamplingParams(
                max_new_tokens=args.max_new_tokens,
                temperature=0.7,
                seed=rep,
                stop=("</answer>",),
                max_batch_size=batch,
            )
            for k in args.examples if rep % 2 == 0 else args.examples[::-1]:
                t0 = time.perf_counter()
                outs = backend.generate(prompts[k], params, adapter="agent_a")
                totals[k][0] += time.perf_counter() - t0
                totals[k][1] += sum(len(o.completion_ids) for o in outs)
                totals[k][2] += len(outs)
        row = {}
        for k, (sec, gen, turns) in totals.items():
            lengths = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts[k]]
            row[str(k)] = {
                "prompt_tokens": round(sum(lengths) / batch, 1),
                "generated_per_turn": round(gen / turns, 1),
                "s_per_turn": round(sec / turns, 3),
                "ms_per_generated_token": round(1e3 * sec / gen, 2),
            }
        ref = row[str(args.examples[0])]
        for r in row.values():
            r["turn_time_over_two_examples"] = round(r["s_per_turn"] / ref["s_per_turn"], 3)
            per_token = r["ms_per_generated_token"] / ref["ms_per_generated_token"]
            r["token_time_over_two_examples"] = round(per_token, 3)
        results[str(batch)] = row
        print(f"batch {batch}: {row}", flush=True)
    print(
        json.dumps(
            {
                "bench": "challenger_prompt",
                "model": args.model,
                "reps": args.reps,
                "threads": torch.get_num_threads(),
                "max_new_tokens": args.max_new_tokens,
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                "machine": platform.machine(),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
