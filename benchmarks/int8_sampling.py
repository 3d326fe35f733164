"""Would int8 sampling weights pay on these cores? KL to fp32, greedy agreement, decode speed.

Issue #23's "fewer bytes per weight" lever, measured before it is built: the base model
(SmolLM2-135M) with some of its Linear layers replaced by torch's dynamic int8 Linear (int8
per-output-channel weights, activations quantized per call; fbgemm kernels) against the same
model in fp32, in one process. The LM head (tied to the embeddings) stays fp32 in every
variant: the issue's first try, which quantized it too, gave KL ≈ 1.6 nats/token.

* **KL(fp32 ‖ int8)** per token, teacher-forced on the fp32 model's own greedy continuations
  of 16 arithmetic few-shot prompts (48 new tokens): what the on-policy guard would see if
  the sampler ran int8 and the trainer fp32 (``grpo.onpolicy_max_kl``, 0.05 by default).
* **greedy agreement**: how often the two argmax tokens match on those positions.
* **speed-up**: fp32 ÷ int8 wall time of ``model.generate`` (greedy, exactly 48 new tokens)
  at batch 8 and 32, interleaved rep by rep so load drift hits both alike.

Weight-only int8 (``torch._weight_int8pack_mm``, activations kept exact in fp32) is not a
variant: ``--weight-only`` times it against the fp32 matmul it would replace, on SmolLM2's four
weight shapes at batch 8 and 32, and prints only that (seconds).

    python benchmarks/int8_sampling.py [--threads 2] [--reps 2]
    python benchmarks/int8_sampling.py --weight-only

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable

import torch
from rollout_bench import make_prompts  # a script beside this one
from torch.ao.quantization import PerChannelMinMaxObserver, PlaceholderObserver, QConfig, quantize_dynamic

from agon_env.agents import SharedBase

ACT = PlaceholderObserver.with_args(dtype=torch.quint8, quant_min=0, quant_max=255, is_dynamic=True)
WEIGHT = PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
VARIANTS: dict[str, Callable[[str], bool]] = {
    "all_but_head": lambda name: True,
    "all_but_head_and_down": lambda name: "down_proj" not in name,
    "attention": lambda name: "self_attn" in name,
    "mlp_gate_up": lambda name: "gate_proj" in name or "up_proj" in name,
}
"""Which Linear layers (by module name, the head never) each variant quantizes. ``down_proj``
reads the MLP's activations, whose outliers a per-call activation scale cannot hold."""


def quantized(model: torch.nn.Module, keep: Callable[[str], bool]) -> tuple[torch.nn.Module, float]:
    """A copy of ``model`` with the chosen Linears in int8, and the share of Linear weight bytes
    (head included) they held in fp32."""
    lins = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    chosen = [n for n in lins if "lm_head" not in n and keep(n)]
    total = sum(m.weight.numel() for m in lins.values())
    share = sum(lins[n].weight.numel() for n in chosen) / total
    qc = QConfig(activation=ACT, weight=WEIGHT)
    return quantize_dynamic(copy.deepcopy(model), dict.fromkeys(chosen, qc), dtype=torch.qint8), share


def weight_only(threads: int, calls: int = 200) -> dict[str, float]:
    """fp32 ``linear`` time ÷ weight-only int8 time per (out, in, batch); above 1 would pay."""
    torch.manual_seed(0)
    out = {}
    for n, k in [(576, 576), (1536, 576), (576, 1536), (49152, 576)]:
        w = torch.randn(n, k)
        scale = w.abs().amax(1) / 127
        wq = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
        for m in (8, 32):
            x = torch.randn(m, k)
            spent = []
            for f, fargs in (
                (torch.nn.functional.linear, (x, w)),
                (torch._weight_int8pack_mm, (x, wq, scale)),
            ):
                f(*fargs)
                t0 = time.perf_counter()
                for _ in range(calls if n < 10_000 else calls // 10):
                    f(*fargs)
                spent.append(time.perf_counter() - t0)
            out[f"{n}x{k}@{m}"] = round(spent[0] / spent[1], 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--weight-only", action="store_true", help="only time weight-only int8 matmuls")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.weight_only:
        ratios = weight_only(args.threads)
        print(json.dumps({"bench": "int8_weight_only", "threads": args.threads, "fp32_over_int8": ratios}))
        return
    torch.manual_seed(0)
    base = SharedBase.from_source(args.model)
    fp32, tok = base.base_model.eval(), base.tokenizer
    enc = tok(make_prompts(tok, 16, seed=1), return_tensors="pt", padding=True, add_special_tokens=False)
    plen = enc["input_ids"].shape[1]
    with torch.inference_mode():
        seq = fp32.generate(**enc, do_sample=False, max_new_tokens=48, pad_token_id=tok.pad_token_id)
        att = (seq != tok.pad_token_id).long()
        att[:, :plen] = enc["attention_mask"]
        lp = torch.log_softmax(fp32(input_ids=seq, attention_mask=att).logits.float(), -1)
    live = att[:, plen:].bool()  # positions predicting a generated, non-padding token
    results: dict[str, dict[str, float]] = {}
    for name, keep in VARIANTS.items():
        q, share = quantized(fp32, keep)
        with torch.inference_mode():
            lq = torch.log_softmax(q(input_ids=seq, attention_mask=att).logits.float(), -1)
        kl = (lp.exp() * (lp - lq)).sum(-1)[:, plen - 1 : -1][live]
        agree = (lp.argmax(-1) == lq.argmax(-1))[:, plen - 1 : -1][live].float().mean()
        r = {
            "weight_bytes_share": round(share, 3),
            "kl_mean": round(kl.mean().item(), 4),
            "kl_p99": round(kl.quantile(0.99).item(), 3),
            "greedy_agreement": round(agree.item(), 3),
        }
        for batch in args.batches:
            e = tok(
                make_prompts(tok, batch, seed=batch),
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
            spent = {"fp32": 0.0, "int8": 0.0}
            for rep in range(args.reps + 1):  # rep 0 warms up
                order = [("fp32", fp32), ("int8", q)]
                for key, model in order if rep % 2 else order[::-1]:
                    t0 = time.perf_counter()
                    with torch.inference_mode():
                        model.generate(
                            **e,
                            do_sample=False,
                            max_new_tokens=48,
                            min_new_tokens=48,
                            pad_token_id=tok.pad_token_id,
                        )
                    if rep:
                        spent[key] += time.perf_counter() - t0
            r[f"speedup_batch{batch}"] = round(spent["fp32"] / spent["int8"], 3)
        results[name] = r
        print(name, r, flush=True)
    limit = 0.05
    passing = {k: v for k, v in results.items() if v["kl_mean"] <= limit}
    print(
        json.dumps(
            {
                "bench": "int8_sampling",
                "model": args.model,
                "threads": args.threads,
                "reps": args.reps,
                "onpolicy_max_kl": limit,
                "variants": results,
                "passing_guard": sorted(passing),
            }
        )
    )


if __name__ == "__main__":
    main()
