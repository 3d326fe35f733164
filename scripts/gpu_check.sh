#!/usr/bin/env bash
# Prove the GPU path in under 8 minutes: load a small model, generate with two adapters in
# one vLLM batch, run two `agon` training steps with vLLM rollouts, print one JSON line.
#
#   bash scripts/gpu_check.sh /path/to/local/model_folder
#
# GPU machines may be offline: bring a model folder, e.g. the converted SmolLM2 cache made
# here by `python -c "from agon_env.agents.models import ensure_smollm2_folder as f; print(f())"`.
set -uo pipefail
cd "$(dirname "$0")/.."
fail() { echo "gpu_check: $*" >&2; exit 2; }

MODEL="${1:-${AGON_GPU_CHECK_MODEL:-}}"
[ -n "$MODEL" ] || fail "usage: bash scripts/gpu_check.sh MODEL_DIR (a local Hugging Face model folder)"
[ -f "$MODEL/config.json" ] || fail "$MODEL is not a model folder (no config.json)"
command -v nvidia-smi >/dev/null 2>&1 || fail "no NVIDIA driver here (nvidia-smi not found); this check needs a GPU"
nvidia-smi -L >/dev/null 2>&1 || fail "nvidia-smi lists no GPU; this check needs one"
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
  || fail "torch cannot see a CUDA device (CPU-only torch build?); install a CUDA torch"
python3 -c "import vllm" 2>/dev/null || fail "vllm is not importable: pip install -e '.[vllm]'"
python3 -c "import agon_env" 2>/dev/null || fail "agon_env is not installed: pip install -e '.[llm]'"

exec timeout 470 python3 scripts/gpu_check.py --model "$MODEL"
