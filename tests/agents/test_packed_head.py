"""The engine's output head packed for oneDNN: the same logits up to round-off, a row's alike among
any number of rows, installed only while the engine is busy and repacked when the head changes."""

from __future__ import annotations

import pytest
import torch

from agon_env.agents import HFBackend, SamplingParams
from agon_env.agents import packed_head as P
from agon_env.agents.engine import engine_for

pytestmark = pytest.mark.skipif(
    not P.packable(torch.nn.Linear(4, 4, bias=False)), reason="this torch has no oneDNN linear"
)

PROMPTS = ["What is 17 + 25?", "Verify the draft.", "0 1 2"]
SAMPLED = SamplingParams(max_new_tokens=12, temperature=1.0, stop=())


class _Model(torch.nn.Module):
    def __init__(self, head: torch.nn.Module) -> None:
        super().__init__()
        self.head = head

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.head


@pytest.mark.parametrize(
    ("vocab", "hidden", "bias"), [(384, 64, False), (4096, 576, False), (1000, 96, True)]
)
def test_packed_logits_are_linears_and_a_rows_own_among_any_number_of_rows(vocab, hidden, bias):
    torch.manual_seed(0)
    head = torch.nn.Linear(hidden, vocab, bias=bias)
    x = torch.randn(40, hidden)
    with torch.no_grad():
        plain = head(x)
        packed = P.PackedHead(keep=False)
        assert packed.install(_Model(head))
        got = head(x[:, None, :])  # [rows, 1, hidden]: a decode step's shape comes back as it went in
        few = [head(x[:m]) for m in range(1, P.MIN_ROWS)]
        among = [head(x[:m]) for m in range(P.MIN_ROWS, 41)]
        packed.remove()
        assert "forward" not in head.__dict__ and torch.equal(head(x), plain)
    assert got.shape == (40, 1, vocab)
    torch.testing.assert_close(got[:, 0], plain, rtol=1e-5, atol=5e-4)
    # a row's logits are the same bits among any number of rows from MIN_ROWS to 40 (F.linear's are
    # not, at 576 wide); fewer rows are F.linear's own
    assert all(torch.equal(out[:3], among[-1][:3]) for out in among)
    assert all(
        torch.equal(out, torch.nn.functional.linear(x[: len(out)], head.weight, head.bias)) for out in few
    )


def test_what_is_not_packable_is_left_to_linear():
    assert not P.packable(torch.nn.Linear(8, 8).to(torch.bfloat16))
    assert not P.packable(torch.nn.Sequential(torch.nn.Linear(8, 8)))  # wrapped (an adapter's layer)
    assert not P.PackedHead(keep=True).install(torch.nn.Linear(8, 8))  # no output embeddings
    before, P.PACKED_HEAD = P.PACKED_HEAD, False
    try:
        head = torch.nn.Linear(8, 8)
        assert not P.PackedHead(keep=True).install(_Model(head)) and "forward" not in head.__dict__
    finally:
        P.PACKED_HEAD = before


def _sample(backend: HFBackend) -> tuple[list[list[int]], torch.Tensor]:
    outs = backend.generate(PROMPTS, SAMPLED, adapter=["agent_a", "agent_b", "agent_a"], seeds=[1, 2, 3])
    return [o.completion_ids for o in outs], torch.tensor([lp for o in outs for lp in o.logprobs])


def test_the_engine_runs_the_packed_head_only_while_busy_and_repacks_a_changed_head(tiny_pair):
    head = tiny_pair.base_model.get_output_embeddings()
    weight = head.weight.detach().clone()
    seen: list[bool] = []
    head.register_forward_pre_hook(lambda m, args: seen.append("forward" in m.__dict__))
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    before, P.PACKED_HEAD = P.PACKED_HEAD, False
    try:
        ids_plain, lp_plain = _sample(backend)
    finally:
        P.PACKED_HEAD = before
    seen.clear()
    ids, lp = _sample(backend)
    assert seen and all(seen)  # every forward of the call ran the packed head ...
    assert "forward" not in head.__dict__  # ... and the idle engine gave the head its own back
    assert torch.equal(head.weight, weight)
    assert ids == ids_plain and torch.allclose(lp, lp_plain, atol=1e-5)
    # training's engine keeps nothing while idle: one pack per busy spell
    assert engine.packed_head.packs == 1 and engine.packed_head._packed is None
    _sample(backend)
    assert engine.packed_head.packs == 2

    # evaluation's and serving's keep it, and pack again only when the head's weight changed
    kept = engine_for(HFBackend(tiny_pair, keep_merged=2))
    _sample(kept.backend)
    _sample(kept.backend)
    assert kept.packed_head.packs == 1 and kept.packed_head._packed is not None
    with torch.no_grad():
        head.weight.mul_(3.0)  # an in-place change: a new version of the same storage
    ids_changed, lp_changed = _sample(kept.backend)
    assert kept.packed_head.packs == 2
    P.PACKED_HEAD = False
    try:
        ids_ref, lp_ref = _sample(backend)
    finally:
        P.PACKED_HEAD = before
    assert ids_changed == ids_ref and torch.allclose(lp_changed, lp_ref, atol=1e-5)
