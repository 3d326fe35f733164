"""Prove the GPU path in one short run: vLLM with two adapters in one batch, then two Agon steps.

Run through ``scripts/gpu_check.sh MODEL_DIR``; prints one JSON line at the end with
rollout tokens/s and the Agon step times.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def two_adapter_batch(model: str, batch: int, max_new_tokens: int) -> dict[str, float]:
    import agon_env
    from agon_env.agents import LoraSpec, SamplingParams, SharedBase, VLLMBackend
    from agon_env.agents.prompts import render_prompts

    base = SharedBase.from_source(model, device="cuda")
    base.add_adapter("agent_a", LoraSpec(init_seed=1, init_b_std=1e-3))
    base.add_adapter("agent_b", LoraSpec(init_seed=2, init_b_std=1e-3))
    env = agon_env.make("agon/arith-v0", difficulty=3)
    obs = []
    for i in range(batch):
        env.reset(options={"problem_index": i})
        obs.append(env.observe("agent_a"))
    prompts = render_prompts(obs, base.tokenizer)
    backend = VLLMBackend(base, gpu_memory_utilization=0.3, dtype="bfloat16")
    try:
        names = ["agent_a", "agent_b"] * (batch // 2)
        params = SamplingParams(temperature=0.7, max_new_tokens=max_new_tokens, seed=0)
        backend.generate(prompts[:2], params, names[:2])  # warm-up: CUDA graphs, LoRA load
        t0 = time.perf_counter()
        outs = backend.generate(prompts, params, names)
        dt = time.perf_counter() - t0
    finally:
        backend.close()
    tokens = sum(len(o.completion_ids) for o in outs)
    assert {o.meta["adapter"] for o in outs} == {"agent_a", "agent_b"}, "both adapters must serve one batch"
    return {"rollout_tok_s": tokens / dt, "rollout_batch": batch, "rollout_tokens": tokens}


def agon_steps(model: str, steps: int) -> dict[str, float]:
    from agon_env.algorithms.cli_train import main as train_main

    out = Path(tempfile.mkdtemp(prefix="agon_gpu_check_")) / "run"
    argv = [
        "--algo",
        "agon",
        "--steps",
        str(steps),
        "--model",
        model,
        "--model.backend",
        "vllm",
        "--model.device",
        "cuda",
    ]
    argv += ["--out-dir", str(out), "--no-progress", "--model.gpu-memory-utilization", "0.3"]
    code = train_main(argv)
    if code:
        raise SystemExit(f"agon train exited with {code}")
    from agon_env.algorithms.run_log import read_metrics

    rows = read_metrics(out)
    times = [r["time/step"] for r in rows if r.get("time/step") is not None]
    return {"agon_steps": len(rows), "agon_step_s": times, "agon_tok_s": rows[-1].get("tokens_per_s")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--steps", type=int, default=2)
    a = p.parse_args()
    result = {
        "model": a.model,
        **two_adapter_batch(a.model, a.batch, a.max_new_tokens),
        **agon_steps(a.model, a.steps),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
