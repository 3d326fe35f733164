"""The two seats are treated alike: a seat's name changes nothing but its seeds and its turn.

Why this exists: in the CPU replication agent_a beat agent_b alone in 5 of 6 pair runs
(docs/benchmarks.md, "Why agent_b trails agent_a"). These tests pin down that the trainer
has no hidden seat asymmetry (which adapter peft creates first, which is updated first,
which optimiser or schedule it gets), and that ``first_drafter`` moves the schedule.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from algo_helpers import tiny_config

from agon_env.algorithms import builders, rollout
from agon_env.algorithms.registry import get_algorithm
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.validation import resolve, validate
from agon_env.config import ConfigError
from agon_env.seeding import derive_seed
from agon_env.vocabulary import AGENT_A, AGENT_B, CHALLENGER, DRAFTER

HERE = Path(__file__).parent
SWAP = {AGENT_A: AGENT_B, AGENT_B: AGENT_A}


pytestmark = pytest.mark.usefixtures("parity_on_path")


def test_first_drafter_hands_the_schedule_to_agent_b():
    agon = get_algorithm("agon")
    assert [agon.drafter(t) for t in range(3)] == [AGENT_A, AGENT_B, AGENT_A]
    mirrored = agon.mirrored(AGENT_B)
    assert [mirrored.drafter(t) for t in range(3)] == [AGENT_B, AGENT_A, AGENT_B]
    assert mirrored.updates(0) == {DRAFTER: AGENT_B, CHALLENGER: AGENT_A}
    fixed = get_algorithm("fixed-roles").mirrored(AGENT_B)
    assert {fixed.drafter(t) for t in range(4)} == {AGENT_B}
    with pytest.raises(ValueError, match="first_drafter"):
        get_algorithm("grpo").mirrored(AGENT_B)  # one adapter: there is no agent_b to hand it to


def test_a_single_adapter_run_refuses_agent_b_as_first_drafter(tmp_path):
    with pytest.raises(ConfigError, match=r"first_drafter = 'agent_b': grpo uses adapters"):
        validate(tiny_config(tmp_path, algo="grpo", first_drafter=AGENT_B))


def _run(tmp_path: Path, steps: int, **updates) -> dict[str, list[torch.Tensor]]:
    tr = Trainer.build(resolve(tiny_config(tmp_path, algo="agon", steps=steps, **updates)))
    for _ in range(steps):
        tr.train_step()
    return {n: [p.detach().clone() for p in tr.base.parameters(n)] for n in tr.plugin.adapters}


def test_mirrored_names_and_schedule_give_the_same_adapters_swapped(tmp_path, monkeypatch):
    """Swap the seat names in every seed *and* the schedule: if the trainer treats the seats
    alike, agent_a of the mirror is bitwise agent_b of the original, and the other way round.
    Anything seat-specific besides seeds and schedule (peft creates agent_a first, the update
    loop visits it first, optimisers and LR schedules are built in that order) would break it."""
    steps = 4
    original = _run(tmp_path / "original", steps)
    assert any(not torch.equal(x, y) for x, y in zip(original[AGENT_A], original[AGENT_B], strict=True))

    def swapped(seed: int, *keys: int | str) -> int:
        return derive_seed(seed, *(SWAP.get(k, k) if isinstance(k, str) else k for k in keys))

    for module in (builders, rollout):
        monkeypatch.setattr(module, "derive_seed", swapped)
    mirror = _run(tmp_path / "mirror", steps, first_drafter=AGENT_B)
    for seat, other in SWAP.items():
        assert all(torch.equal(x, y) for x, y in zip(mirror[seat], original[other], strict=True)), seat
