"""Rollout throughput: our HF backend vs plain ``model.generate`` on the same prompts.

Both sides get the same few-shot prompts rendered from ``agon/arith``-style problems,
the same sampling settings (temperature, top-p, max_new_tokens, EOS and the
``</answer>`` stop string) and run in the same process, interleaved rep by rep so a
noisy shared CPU hurts both alike. Tokens counted = generated tokens before EOS.

Four runs per rep, like for like: ``model.generate`` and our backend on the bare base,
and both again with a LoRA adapter active (the real rollout setting). ``model.generate``
runs stock transformers (``sdpa`` attention, peft's LoRA layers); ours is what training
uses: the adapter merged into a copy of the base weights, grouped-KV attention, a
preallocated KV cache, the shared prompt prefix prefilled once. The tokens/s of ours with
an adapter is also printed as a fraction of the compute bound (a large matmul's fp32
GFLOP/s measured now ÷ 2 × the parameters a decode step multiplies by). The pass criterion is ``ratio >= 1.0``
for both pairs at every batch size. ``ratio_adapter_vs_bare_generate`` (ours with an
adapter ÷ ``generate`` without one) is reported as well.

Seeds: training seeds every turn (``seeds=`` one per row, each row its own generator: one
uniform per row and step), so ours does too by default; ``model.generate`` has one generator for
the batch, all its callers get. ``--seeds shared`` gives ours the batch's one seed instead (a
vocabulary of exponential draws per row and step, torch's multinomial): the figures before
issue 59's last round were measured that way.

A fifth run is ours with an adapter and the shared prompt prefix copied into every row's
cache (``HFBackend(prefix_attention=False)``, how it sampled before issue #23's lever):
``prefix_once_over_copied`` is ours ÷ that run, the lever weighed in the same invocation.
``--role challenger`` renders challenger turns instead of drafts (the problem and a draft's
summary after the challenger's worked challenges: a ~4× longer shared prefix, what a
cascade's second turn and Agon's second stream sample).

    python benchmarks/rollout_bench.py [--batches 8 32] [--reps 3] [--max-new-tokens 96] [--threads N]
    python benchmarks/rollout_bench.py --role challenger   # the second turn's prompts
    python benchmarks/rollout_bench.py --vllm   # with vllm installed: VLLMBackend ÷ raw LLM.generate

With ``--vllm`` the same prompts go through our ``VLLMBackend`` (adapter ``agent_a``)
and through the raw ``vllm.LLM.generate`` of the same engine with the same
``LoRARequest``; the criterion there is ``min(ratio) >= 0.9``.

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time

import torch

from agon_env.agents import HFBackend, LoraSpec, SamplingParams, SharedBase, render_prompt
from agon_env.vocabulary import CHALLENGE, challenger_text

SUMMARIES = (
    "Added the two numbers, then the third.",
    "Multiplied first, then added.",
    "Subtracted, then added.",
)


def observations(n: int, seed: int, role: str = "drafter") -> list[dict]:
    """``agon/arith``-style drafting observations, or challenger ones reading a method summary."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
        op = rng.choice(["+", "-", "*"])
        problem = f"What is {a} {op} {b} + {c}?"
        obs = {"text": "", "problem": problem, "draft": "", "role": 0}
        if role == "challenger":
            draft = rng.choice(SUMMARIES)
            obs = {
                "text": challenger_text(problem, draft),
                "problem": problem,
                "draft": draft,
                "role": CHALLENGE,
            }
        out.append(obs)
    return out


def make_prompts(tokenizer, n: int, seed: int, role: str = "drafter") -> list[str]:
    return [render_prompt(obs, tokenizer) for obs in observations(n, seed, role)]


def count_generated(row: list[int], eos: set[int]) -> int:
    for i, t in enumerate(row):
        if t in eos:
            return i
    return len(row)


def run_generate(
    base: SharedBase, prompts: list[str], params: SamplingParams, adapter: str, eos: set[int]
) -> tuple[int, float]:
    """Plain ``model.generate`` on the bare base (``"__base__"``) or with ``adapter`` active."""
    tok = base.tokenizer
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    policy = base.reference() if adapter == "__base__" else base.use(adapter)
    attn = base.base_model.config._attn_implementation
    base.base_model.set_attn_implementation("sdpa")  # stock transformers: ours is the GQA path
    t0 = time.perf_counter()
    with torch.inference_mode(), policy as model:
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,
            max_new_tokens=params.max_new_tokens,
            stop_strings=list(params.stop),
            tokenizer=tok,
            pad_token_id=tok.pad_token_id,
        )
    dt = time.perf_counter() - t0
    base.base_model.set_attn_implementation(attn)
    gen = out[:, enc["input_ids"].shape[1] :].tolist()
    return sum(count_generated(r, eos) for r in gen), dt


def matmul_peak_gflops(seconds: float = 1.5) -> float:
    """fp32 GFLOP/s of a large square matmul on this machine now: the compute bound's numerator."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    return 2 * 1024**3 * n / (time.perf_counter() - t0) / 1e9


def flops_per_token(model) -> float:
    """2 × every parameter a decode step multiplies by (embeddings are a lookup, the head is not)."""
    head = model.get_output_embeddings().weight
    embed = model.get_input_embeddings().weight
    params = sum(p.numel() for p in model.parameters() if p is not embed) + head.numel() * (head is embed)
    return 2.0 * params


def run_ours(
    backend: HFBackend,
    prompts: list[str],
    params: SamplingParams,
    adapter: str,
    eos: set[int],
    seeds: list[int] | None = None,
):
    t0 = time.perf_counter()
    outs = backend.generate(prompts, params, adapter=adapter, seeds=seeds)
    dt = time.perf_counter() - t0
    return sum(count_generated(o.completion_ids, eos) for o in outs), dt


def run_raw_vllm(llm, ids: list[list[int]], vparams: list, lora, eos: set[int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    out = llm.generate(
        [{"prompt_token_ids": x} for x in ids], vparams, lora_request=[lora] * len(ids), use_tqdm=False
    )
    dt = time.perf_counter() - t0
    return sum(count_generated(list(o.outputs[0].token_ids), eos) for o in out), dt


def run_vllm(args: argparse.Namespace) -> dict:
    from vllm import SamplingParams as VSP

    from agon_env.agents.vllm_backend import VLLMBackend

    base = SharedBase.from_source(args.model)
    base.add_adapter("agent_a", LoraSpec(init_b_std=0.01))
    backend = VLLMBackend(base, max_model_len=1024, gpu_memory_utilization=args.gpu_memory_utilization)
    eos = set(HFBackend(base).eos_ids)
    lora = backend.requests["agent_a"]
    results = {}
    for batch in args.batches:
        prompts = make_prompts(base.tokenizer, batch, seed=batch, role=args.role)
        ids = [base.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        totals = {"raw": [0, 0.0], "ours": [0, 0.0]}
        for rep in range(args.reps + 1):  # rep 0 warms up and is not counted
            params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=0.7, top_p=0.95, seed=rep)
            vparams = [
                VSP(
                    max_tokens=params.max_new_tokens,
                    temperature=0.7,
                    top_p=0.95,
                    seed=rep + i,
                    stop=list(params.stop),
                    include_stop_str_in_output=True,
                    logprobs=0,
                )
                for i in range(batch)
            ]

            # Alternate who goes first, so drift in a shared machine's load hits both alike.
            if rep % 2:
                n_ours, t_ours = run_ours(backend, prompts, params, "agent_a", eos)
                n_raw, t_raw = run_raw_vllm(backend.llm, ids, vparams, lora, eos)
            else:
                n_raw, t_raw = run_raw_vllm(backend.llm, ids, vparams, lora, eos)
                n_ours, t_ours = run_ours(backend, prompts, params, "agent_a", eos)
            if rep:
                totals["raw"][0] += n_raw
                totals["raw"][1] += t_raw
                totals["ours"][0] += n_ours
                totals["ours"][1] += t_ours
        tps = {k: v[0] / v[1] for k, v in totals.items()}
        results[str(batch)] = {
            "raw_tok_s": round(tps["raw"], 2),
            "ours_tok_s": round(tps["ours"], 2),
            "ratio": round(tps["ours"] / tps["raw"], 3),
            "raw_tokens": totals["raw"][0],
            "ours_tokens": totals["ours"][0],
        }
        print(f"vllm batch {batch}: {results[str(batch)]}", flush=True)
    backend.close()
    worst = min(r["ratio"] for r in results.values())
    return {
        "bench": "rollout-vllm",
        "model": args.model,
        "results": results,
        "min_ratio": worst,
        "pass": worst >= 0.9,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--vllm", action="store_true", help="benchmark the vLLM backend instead")
    ap.add_argument("--role", choices=["drafter", "challenger"], default="drafter", help="whose prompts")
    ap.add_argument(
        "--seeds",
        choices=["per-row", "shared"],
        default="per-row",
        help="ours: a seed per row, as training's turns (default), or the batch's one",
    )
    ap.add_argument(
        "--gpu-memory-utilization", type=float, default=0.4, help="vLLM memory share (CPU: of RAM)"
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.vllm:
        print(json.dumps(run_vllm(args)))
        return

    torch.manual_seed(0)
    base = SharedBase.from_source(args.model)
    base.add_adapter("agent_a", LoraSpec(init_b_std=0.01))
    backend = HFBackend(base)
    copied = HFBackend(base, prefix_attention=False)
    eos = set(backend.eos_ids)
    results: dict[str, dict[str, float]] = {}
    for batch in args.batches:
        prompts = make_prompts(base.tokenizer, batch, seed=batch, role=args.role)
        runs = {
            "generate_base": ("generate", "__base__"),
            "ours_base": ("ours", "__base__"),
            "generate_adapter": ("generate", "agent_a"),
            "ours_adapter": ("ours", "agent_a"),
            "ours_adapter_prefix_copied": ("copied", "agent_a"),
        }
        totals = {k: [0, 0.0] for k in runs}
        # Warm-up (allocator, first-call overheads) is not measured.
        warm = SamplingParams(max_new_tokens=4, temperature=0.7, top_p=0.95, seed=0)
        run_generate(base, prompts, warm, "agent_a", eos)
        run_ours(backend, prompts, warm, "agent_a", eos)
        for rep in range(args.reps):
            params = SamplingParams(
                max_new_tokens=args.max_new_tokens,
                temperature=0.7,
                top_p=0.95,
                seed=rep,
                max_batch_size=batch,
            )
            # Interleaved, and reversed every other rep, so load drift hits all runs alike.
            for key in list(runs) if rep % 2 == 0 else list(runs)[::-1]:
                kind, adapter = runs[key]
                torch.manual_seed(rep)
                if kind == "generate":
                    n, dt = run_generate(base, prompts, params, adapter, eos)
                else:
                    seeds = [rep * batch + i for i in range(batch)] if args.seeds == "per-row" else None
                    chosen = backend if kind == "ours" else copied
                    n, dt = run_ours(chosen, prompts, params, adapter, eos, seeds)
                totals[key][0] += n
                totals[key][1] += dt
        tps = {k: v[0] / v[1] for k, v in totals.items()}
        results[str(batch)] = {
            **{f"{k}_tok_s": round(v, 2) for k, v in tps.items()},
            **{f"{k}_tokens": v[0] for k, v in totals.items()},
            "ratio_base": round(tps["ours_base"] / tps["generate_base"], 3),
            "ratio_adapter": round(tps["ours_adapter"] / tps["generate_adapter"], 3),
            "ratio_adapter_vs_bare_generate": round(tps["ours_adapter"] / tps["generate_base"], 3),
            "prefix_once_over_copied": round(tps["ours_adapter"] / tps["ours_adapter_prefix_copied"], 3),
        }
        print(f"batch {batch}: {results[str(batch)]}", flush=True)
    worst = min(min(r["ratio_base"], r["ratio_adapter"]) for r in results.values())
    peak = matmul_peak_gflops()
    bound = peak * 1e9 / flops_per_token(base.base_model)
    for r in results.values():
        r["ours_adapter_fraction_of_compute_bound"] = round(r["ours_adapter_tok_s"] / bound, 3)
    summary = {
        "matmul_peak_gflops": round(peak, 1),
        "compute_bound_tok_s": round(bound, 1),
        "bench": "rollout",
        "model": args.model,
        "role": args.role,
        "seeds": args.seeds,
        "max_new_tokens": args.max_new_tokens,
        "reps": args.reps,
        "threads": torch.get_num_threads(),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "machine": platform.machine(),
        "results": results,
        "min_ratio": worst,
        "min_ratio_adapter": min(r["ratio_adapter"] for r in results.values()),
        "pass": worst >= 1.0,
        "goal_adapter_3x": min(r["ratio_adapter"] for r in results.values()) >= 3.0,
    }
    # Each ratio also at the top level, named by batch, so a script reads them without nesting.
    for b, r in results.items():
        keys = (
            "ratio_base",
            "ratio_adapter",
            "ours_adapter_fraction_of_compute_bound",
            "prefix_once_over_copied",
        )
        for k in keys:
            summary[f"{k}_batch{b}"] = r[k]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
