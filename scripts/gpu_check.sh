#!/usr/bin/env bash
# The paper path on one GPU in under 10 minutes: configs/paper-qwen3-0.6b-deepmath.yaml with
# vLLM rollouts (model, steps, batch and budget shrunk), then agon eval; one JSON line at the end;
# then benchmarks/cascade_bench.py (the cascade's latency against one adapter alone): its own JSON line.
#
#   bash scripts/gpu_check.sh                          # tiny-qwen3, built in-process (offline)
#   bash scripts/gpu_check.sh --model /models/Qwen3-0.6B --max-new-tokens 2048
#
# GPU machines here are offline: tiny-qwen3 needs no download; bring any other model as a folder.
set -uo pipefail
cd "$(dirname "$0")/.."
fail() { echo "gpu_check: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null 2>&1 || fail "no NVIDIA driver here (nvidia-smi not found); this check needs a GPU"
nvidia-smi -L >/dev/null 2>&1 || fail "nvidia-smi lists no GPU; this check needs one"
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
  || fail "torch cannot see a CUDA device (CPU-only torch build?); install a CUDA torch"
python3 -c "import vllm" 2>/dev/null || fail "vllm is not importable: pip install -e '.[vllm]'"
python3 -c "import agon_env" 2>/dev/null || fail "agon_env is not installed: pip install -e '.[llm]'"

timeout 590 python3 scripts/gpu_check.py "$@"
rc=$?
# The cascade's cost against one adapter alone, and the early-stop lever, on the GPU (docs/serving.md;
# the CPU figures are docs/benchmarks.md's). tiny-qwen3 unless CASCADE_MODEL names a folder; ~2 min.
timeout 240 python3 benchmarks/cascade_bench.py --model "${CASCADE_MODEL:-tiny-qwen3}" --device cuda \
  --questions 32 --singles 4 --reps 3 --max-new-tokens 256
bench=$?
[ "$rc" -eq 0 ] && rc=$bench
exit "$rc"
