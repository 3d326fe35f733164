"""How far one optimiser step moves an adapter at each learning rate: ``‖Δθ‖/‖θ‖`` (the blow-up
watch's figure, :mod:`agon_env.algorithms.blowup`) of the first step of a tiny run.

``PYTHONPATH=$PWD python scripts/update_ratios.py 2e-4 1e-2 0.1 0.9``: the tiny model on the
tests' ``test/parity-v0`` (2 problems × 4 rollouts, 4 new tokens, no warm-up), one line per rate:
the ratio of each adapter's first update, read around the optimiser step.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "algorithms"))

from algo_helpers import tiny_config

from agon_env.algorithms import update as update_module
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import resolve


def first_step_ratios(lr: float) -> list[float]:
    seen: list[float] = []
    real = update_module.update_ratio

    def watched(after, before):  # type: ignore[no-untyped-def]
        seen.append(real(after, before))
        return seen[-1]

    update_module.update_ratio = watched
    try:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = tiny_config(Path(tmp), **{"optim.lr": lr, "optim.warmup_ratio": 0.0})
            Trainer.build(resolve(cfg)).train_step()
    finally:
        update_module.update_ratio = real
    return seen


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["2e-4", "1e-2", "0.1", "0.9"]:
        print(f"lr {arg}: ‖Δθ‖/‖θ‖ = {', '.join(f'{r:.3g}' for r in first_step_ratios(float(arg)))}")
