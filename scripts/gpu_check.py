"""The paper path on one GPU, in minutes: the preset's exact recipe with vLLM rollouts, then eval.

Run through ``scripts/gpu_check.sh`` (it refuses, in one line, without a GPU). Trains
``configs/paper-qwen3-0.6b-deepmath.yaml`` with only the model, steps, batch sizes and
response budget shrunk, on a DeepMath-format fixture (the GPU machine is offline), then
runs ``agon eval`` on the run. The last line of stdout is one JSON object: step time,
rollout tokens/s, peak GPU memory (whole device, sampled with nvidia-smi, so vLLM's engine
process counts) and the trainer's own peak allocation.

    python scripts/gpu_check.py                       # tiny-qwen3 (built in-process)
    python scripts/gpu_check.py --model /models/Qwen3-0.6B --max-new-tokens 2048
    python scripts/gpu_check.py --device cpu --backend hf   # a dry run of this script on CPU
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PRESET = "paper-qwen3-0.6b-deepmath"


class GpuMemory:
    """Peak memory in use on GPU 0 (all processes), sampled every 0.2 s with nvidia-smi."""

    def __init__(self) -> None:
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                ).stdout
                self.peak_mib = max(self.peak_mib, float(out.strip().splitlines()[0]))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                pass
            self._stop.wait(0.2)

    def __enter__(self) -> GpuMemory:
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny-qwen3", help="alias or local folder (the GPU machine is offline)")
    p.add_argument("--steps", type=int, default=4, help="steps (the mean skips the first)")
    p.add_argument("--batch-problems", type=int, default=4)
    p.add_argument("--n", type=int, default=8, help="rollouts per problem (the preset's N)")
    p.add_argument("--max-new-tokens", type=int, default=512, help="response budget (the preset's is 10240)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="vllm", help="the preset's vllm; hf for a dry run on CPU")
    p.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    a = p.parse_args()

    import torch

    from agon_env.algorithms.commands.train import main as train_main
    from agon_env.cli import main as agon_main
    from agon_env.envs.tasks.fixtures import write_deepmath_fixture
    from agon_env.run_folder import read_metrics

    work = Path(a.out or tempfile.mkdtemp(prefix="agon_gpu_check_"))
    fixture = write_deepmath_fixture(work / "deepmath.parquet", n=400)
    run = work / "run"
    argv = [
        "--config",
        PRESET,
        "--model",
        a.model,
        "--steps",
        str(a.steps),
        "--batch-problems",
        str(a.batch_problems),
        "--n",
        str(a.n),
        "--sampling.max-new-tokens",
        str(a.max_new_tokens),
        "--env.kwargs",
        f"path={fixture}",
        "--model.device",
        a.device,
        "--model.backend",
        a.backend,
        "--out-dir",
        str(run),
        "--no-progress",
    ]
    cuda = a.device == "cuda" and torch.cuda.is_available()
    started = time.perf_counter()
    with GpuMemory() as mem:
        code = train_main(argv)
        if code:
            print(f"gpu_check: agon train exited with {code}", file=sys.stderr)
            return code
        train_s = time.perf_counter() - started
        t0 = time.perf_counter()
        eval_argv = [str(run), "--problems", "32", "--val-problems", "16", "--device", a.device, "--quiet"]
        code = agon_main(["eval", *eval_argv])
        if code:
            print(f"gpu_check: agon eval exited with {code}", file=sys.stderr)
            return code
        eval_s = time.perf_counter() - t0
    rows = read_metrics(run)
    steps = [r["time/step"] for r in rows][1:] or [r["time/step"] for r in rows]
    rollout_tok_s = [r["tokens_per_s"] for r in rows][1:] or [r["tokens_per_s"] for r in rows]
    kls = [v for r in rows for k, v in r.items() if k.startswith("onpolicy/kl/") and v is not None]
    result = {
        "model": a.model,
        "backend": a.backend,
        "device": torch.cuda.get_device_name(0) if cuda else a.device,
        "steps": len(rows),
        "batch": f"{a.batch_problems}x{a.n}",
        "max_new_tokens": a.max_new_tokens,
        "step_s": sum(steps) / len(steps),
        "rollout_tok_s": sum(rollout_tok_s) / len(rollout_tok_s),
        "mean_completion_tokens": rows[-1].get("len_tokens/drafter"),
        "onpolicy_kl_max": max(kls) if kls else None,
        "peak_gpu_mem_gib": mem.peak_mib / 1024 if mem.peak_mib else None,
        "trainer_peak_alloc_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "train_s": train_s,
        "eval_s": eval_s,
        "run": str(run),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
