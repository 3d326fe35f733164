#!/usr/bin/env bash
# Fixed-seed 3-step tiny runs of every plugin into OUTDIR; run from a checkout: PYTHONPATH=$PWD bash scripts/fixed_seed_runs.sh OUTDIR
out=$1; mkdir -p $out
for a in $(python -c 'from agon_env.algorithms.registry import algorithm_names; print(*algorithm_names())'); do
  OMP_NUM_THREADS=1 python -m agon_env.cli train --model tiny --algo $a --steps 3 --seed 0 --out-dir $out/$a > $out/$a.log 2>&1 || echo "FAIL $a"
done
