"""Memory: peak RSS of one base + 2 LoRA adapters ÷ one base + 1 adapter (SmolLM2-135M).

Each configuration runs in a fresh subprocess (peak RSS is per process and never goes
down), doing the same work: load the base, add k adapters (r=16, all linear layers),
then sample a batch of 4 × 32 tokens with each of two adapter slots (with k=1 both
slots are ``agent_a``). With ``--train`` each slot also takes one AdamW step (gradients
and optimiser state are per adapter, so that ratio is reported separately).

    python benchmarks/memory_bench.py [--model smollm2-135m] [--train]

Pass criterion: rss(k=2) / rss(k=1) <= 1.05 in the rollout setting.
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

PROMPT = "<|im_start|>user\nWhat is 12 + 30? Explain.<|im_end|>\n<|im_start|>assistant\n"


def child(model: str, k: int, train: bool) -> dict[str, float]:
    import torch

    from agon_env.agents import HFBackend, LoraSpec, SamplingParams, SharedBase

    base = SharedBase.from_source(model)
    names = [f"agent_{c}" for c in "ab"[:k]]
    for i, name in enumerate(names):
        base.add_adapter(name, LoraSpec(init_seed=i, init_b_std=1e-3))
    backend = HFBackend(base)
    # Two slots whatever k is, so every configuration does the same work (k=0: bare base).
    slots = [names[0], names[-1]] if names else [None, None]
    optims = {n: torch.optim.AdamW(base.parameters(n), lr=1e-5) for n in names} if train else {}
    for name in slots:
        outs = backend.generate(
            [PROMPT] * 4, SamplingParams(max_new_tokens=32, seed=0, stop=()), adapter=name
        )
        if train and name is not None:
            ids = torch.tensor([outs[0].prompt_ids + outs[0].completion_ids])
            with base.use(name) as m:
                m(input_ids=ids, labels=ids).loss.backward()
            optims[name].step()
            optims[name].zero_grad(set_to_none=False)  # keep grads allocated, as a trainer would
    adapter_bytes = sum(p.numel() * p.element_size() for n in names for p in base.parameters(n))
    base_bytes = sum(
        p.numel() * p.element_size() for n, p in base.model.named_parameters() if "lora_" not in n
    )
    return {
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "adapter_mb": adapter_bytes / 2**20,
        "base_mb": base_bytes / 2**20,
    }


def measure(model: str, k: int, train: bool) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", str(k), "--model", model] + (["--train"] if train else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--train", action="store_true", help="also measure with one AdamW step per adapter")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.model, args.child, args.train)))
        return

    modes = [False, True] if args.train else [False]
    results = {}
    for train in modes:
        runs = (
            {k: measure(args.model, k, train) for k in (0, 1, 2)}
            if not train
            else {k: measure(args.model, k, train) for k in (1, 2)}
        )
        key = "train" if train else "rollout"
        results[key] = {
            "peak_rss_mb": {str(k): round(v["peak_rss_mb"], 1) for k, v in runs.items()},
            "adapter_mb_each": round(runs[1]["adapter_mb"], 2),
            "base_params_mb": round(runs[1]["base_mb"], 1),
            "ratio_2_over_1": round(runs[2]["peak_rss_mb"] / runs[1]["peak_rss_mb"], 4),
        }
        if 0 in runs:
            results[key]["ratio_2_over_0"] = round(runs[2]["peak_rss_mb"] / runs[0]["peak_rss_mb"], 4)
        print(f"{key}: {results[key]}", flush=True)
    ratio = results["rollout"]["ratio_2_over_1"]
    print(
        json.dumps(
            {
                "bench": "memory",
                "model": args.model,
                "results": results,
                "ratio": ratio,
                "pass": ratio <= 1.05,
            }
        )
    )


if __name__ == "__main__":
    main()
