"""A tiny run folder for the serving tests: the tiny random model, two adapters, greedy sampling."""

from __future__ import annotations

import json
from pathlib import Path


def write_tiny_run(
    run: Path,
    temperature: float = 0.0,
    max_new_tokens: int = 16,
    direction: str | None = None,
    model: str = "tiny",
) -> Path:
    """``run`` as ``agon train`` leaves it (config.yaml, adapters/), with an eval report choosing
    ``direction`` when given. ``model``: ``tiny``, or ``tiny-qwen3`` (a folder vLLM can load)."""
    from agon_env.agents.adapters import LoraSpec, SharedBase

    run.mkdir(parents=True, exist_ok=True)
    base = SharedBase.from_source(model)
    for i, name in enumerate(("agent_a", "agent_b")):
        base.add_adapter(name, LoraSpec(r=4, alpha=8, init_seed=i + 1, init_b_std=0.05))
        base.save(name, run / "adapters" / name)
    (run / "config.yaml").write_text(
        f"algo: agon\nmodel: {{name: {model}, lora_r: 4, lora_alpha: 8}}\n"
        "env: {id: agon/arith-v0, kwargs: {difficulty: 1}}\n"
        f"sampling: {{temperature: {temperature}, max_new_tokens: {max_new_tokens}}}\n"
    )
    if direction:
        (run / "eval").mkdir()
        report = {"runs": [{"label": str(run), "selection": {"chosen": f"cascade:{direction}"}}]}
        (run / "eval" / "eval.json").write_text(json.dumps(report))
    return run
