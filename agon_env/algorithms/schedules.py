"""Learning-rate schedules by name: a linear warm-up, then the named decay."""

from __future__ import annotations

from collections.abc import Callable

DECAYS: dict[str, Callable[[int, int, int], float]] = {
    "linear": lambda s, warm, total: max(0.0, (total - s) / max(1, total - warm)),
    "constant": lambda s, warm, total: 1.0,
}
"""LR multiplier after warm-up by schedule name: ``(step, warm-up steps, total) -> factor``."""


def lr_lambda(total: int, warmup_ratio: float, schedule: str) -> Callable[[int], float]:
    """Multiplier of the base lr at optimiser step ``s`` (0-based)."""
    warm = round(warmup_ratio * total)
    decay = DECAYS[schedule]

    def f(s: int) -> float:
        if s < warm:
            return (s + 1) / (warm + 1)  # never exactly 0: step 0 would be a wasted rollout
        return decay(s, warm, total)

    return f
