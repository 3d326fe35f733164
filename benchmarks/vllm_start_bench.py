"""How long a ``VLLMBackend`` takes to start on CPU, under the settings the vLLM tests use.

Three child processes, one after another, each starting ``VLLMBackend`` on SmolLM2-135M (``--model``)
with two LoRA adapters (``max_model_len`` 1024), generating once, and closing:

``default``     vLLM's defaults as ``VLLMBackend`` passes them: the engine core and its worker in
                processes of their own, and ``gpu_memory_utilization`` 0.4, which on the CPU
                backend reserves that share of host memory for the KV cache
``kv_1gib``     ``VLLM_CPU_KVCACHE_SPACE=1``: a 1 GiB KV cache (a 135M model needs a few MB)
``in_process``  the same and ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine in the caller's process
                (``vllm.LLM`` only; ``AsyncLLM``, which serving uses, always runs it in another)
``from_run``    started as every command starts it, from a run (:data:`agon_env.runtime.BACKENDS`):
                on CPU a KV cache for ``max_model_len`` x the run's batch (32), not a share of host memory

Per setting: ``start_s`` (constructing the backend: engine start and both adapters registered),
``generate_s`` and ``close_s``. Run with an interpreter that imports vllm::

    .venv-vllm/bin/python benchmarks/vllm_start_bench.py [--settings default in_process] [--model tiny-qwen3]

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "kv_1gib": {"VLLM_CPU_KVCACHE_SPACE": "1"},
    "in_process": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
    "from_run": {"AGON_BENCH_FROM_RUN": "1"},
}


def child(model: str) -> None:
    from agon_env.agents import LoraSpec, SamplingParams, SharedBase
    from agon_env.agents.vllm_backend import VLLMBackend

    base = SharedBase.from_source(model)
    base.add_adapter("agent_a", LoraSpec(init_seed=1))
    base.add_adapter("agent_b", LoraSpec(init_seed=2))
    t0 = time.perf_counter()
    if os.environ.get("AGON_BENCH_FROM_RUN"):
        from agon_env.config import ModelConfig, TrainConfig
        from agon_env.resolved import settle
        from agon_env.runtime import BACKENDS

        run = settle(TrainConfig(model=ModelConfig(name=model, max_seq_len=1024)))
        backend = BACKENDS["vllm"](run, base, "cpu", False)
    else:
        backend = VLLMBackend(base, max_model_len=1024)
    t1 = time.perf_counter()
    out = backend.generate(["What is 2 + 5?"] * 4, SamplingParams(max_new_tokens=16, temperature=0))
    t2 = time.perf_counter()
    backend.close()
    t3 = time.perf_counter()
    assert len(out) == 4
    timings = {"start_s": t1 - t0, "generate_s": t2 - t1, "close_s": t3 - t2}
    print("TIMINGS " + json.dumps({k: round(v, 1) for k, v in timings.items()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    ap.add_argument("--model", default="smollm2-135m", help="a model alias, folder or hub id")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.model)
        return
    timings: dict[str, dict[str, float]] = {}
    ours = {k for setting in SETTINGS.values() for k in setting}
    clean = {k: v for k, v in os.environ.items() if k not in ours}
    for name in args.settings:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", "--model", args.model],
            env={**clean, **SETTINGS[name]},
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("TIMINGS ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"{name}: rc={proc.returncode}\n{proc.stderr[-3000:]}")
        timings[name] = json.loads(lines[-1].removeprefix("TIMINGS "))
        print(f"{name}: {timings[name]}")
    result: dict[str, object] = {"bench": "vllm_start", **timings}
    if "default" in timings:
        for name in timings.keys() - {"default"}:
            result[f"{name}_over_default_start"] = round(
                timings[name]["start_s"] / timings["default"]["start_s"], 2
            )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
