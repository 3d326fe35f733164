from __future__ import annotations

import pytest
import torch

from agon_env.agents.adapters import LoraSpec, SharedBase
from agon_env.vocabulary import REFERENCE


def _logits(base: SharedBase, name: str, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), base.use(name) as model:
        return model(input_ids=x).logits


X = torch.tensor([[5, 17, 60, 99, 120, 7], [30, 31, 32, 33, 34, 35]])


def test_fresh_adapter_equals_base_and_b_init_makes_rivals_differ(tiny_base):
    with torch.no_grad():
        bare = tiny_base.model(input_ids=X).logits
    tiny_base.add_adapter("zero")
    tiny_base.add_adapter("agent_a", LoraSpec(init_b_std=0.05))
    tiny_base.add_adapter("agent_b", LoraSpec(init_b_std=0.05))
    assert torch.allclose(_logits(tiny_base, "zero", X), bare)
    a, b = _logits(tiny_base, "agent_a", X), _logits(tiny_base, "agent_b", X)
    assert not torch.allclose(a, bare, atol=1e-4) and not torch.allclose(a, b, atol=1e-4)
    assert torch.equal(_logits(tiny_base, REFERENCE, X), bare)
    with torch.no_grad(), tiny_base.reference() as model:
        assert torch.equal(model(input_ids=X).logits, bare)


def test_init_is_seeded_per_adapter_and_independent_of_global_rng():
    def a_weights(seed_global: int, spec: LoraSpec) -> list[torch.Tensor]:
        torch.manual_seed(seed_global)
        base = SharedBase.from_source("tiny")
        base.add_adapter("agent_a", spec)
        return [p.detach().clone() for p in base.parameters("agent_a")]

    w1 = a_weights(0, LoraSpec(init_seed=7, init_b_std=0.01))
    w2 = a_weights(123, LoraSpec(init_seed=7, init_b_std=0.01))
    w3 = a_weights(0, LoraSpec(init_seed=8, init_b_std=0.01))
    assert all(torch.equal(x, y) for x, y in zip(w1, w2, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(w1, w3, strict=True))
    # The default seed comes from the name, so agent_a and agent_b differ without being told.
    assert LoraSpec().seed_for("agent_a") != LoraSpec().seed_for("agent_b")


def test_duplicate_and_reserved_names_are_refused(tiny_base):
    tiny_base.add_adapter("agent_a")
    with pytest.raises(ValueError, match="already exists"):
        tiny_base.add_adapter("agent_a")
    with pytest.raises(ValueError, match="invalid adapter name"):
        tiny_base.add_adapter(REFERENCE)
    with pytest.raises(KeyError, match="no adapter 'ghost'"):
        tiny_base.parameters("ghost")


def test_parameters_are_one_adapters_lora_weights_only(tiny_pair):
    pa, pb = tiny_pair.parameters("agent_a"), tiny_pair.parameters("agent_b")
    names_a = [n for n, _ in tiny_pair.named_parameters("agent_a")]
    assert pa and len(pa) == len(pb)
    assert all(".agent_a." in n and "lora_" in n for n in names_a)
    assert not {id(p) for p in pa} & {id(p) for p in pb}
    assert all(p.requires_grad for p in pa + pb)
    base_params = list(tiny_pair.base_model.parameters())
    trainable = {id(p) for p in base_params if p.requires_grad}
    assert trainable == {id(p) for p in pa + pb}
    # r=16 on every linear projection of a 2-layer, hidden-64 model: 7 projections per layer.
    assert len(pa) == 2 * 7 * 2


def test_training_one_adapter_leaves_the_other_and_the_base_untouched(tiny_pair):
    base_before = {n: p.detach().clone() for n, p in tiny_pair.model.named_parameters() if "lora_" not in n}
    a_before = [p.detach().clone() for p in tiny_pair.parameters("agent_a")]
    b_before = [p.detach().clone() for p in tiny_pair.parameters("agent_b")]
    opt = torch.optim.AdamW(tiny_pair.parameters("agent_a"), lr=1e-2)
    tiny_pair.model.train()
    for _ in range(2):
        with tiny_pair.use("agent_a") as model:
            loss = model(input_ids=X, labels=X).loss
        opt.zero_grad()
        loss.backward()
        assert all(p.grad is None for p in tiny_pair.parameters("agent_b"))
        opt.step()
    assert any(not torch.equal(p, q) for p, q in zip(tiny_pair.parameters("agent_a"), a_before, strict=True))
    assert all(torch.equal(p, q) for p, q in zip(tiny_pair.parameters("agent_b"), b_before, strict=True))
    for n, p in tiny_pair.model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, base_before[n]), n


def test_switching_adapters_never_copies_base_weights(tiny_pair):
    ptrs = {n: p.data_ptr() for n, p in tiny_pair.base_model.named_parameters() if "lora_" not in n}
    for name in ["agent_a", "agent_b", REFERENCE, "agent_a"]:
        _logits(tiny_pair, name, X)
        now = {n: p.data_ptr() for n, p in tiny_pair.base_model.named_parameters() if "lora_" not in n}
        assert now == ptrs


def test_use_restores_the_previous_adapter(tiny_pair):
    b = _logits(tiny_pair, "agent_b", X)
    tiny_pair.set_adapter("agent_b")
    with tiny_pair.use("agent_a"):
        assert tiny_pair.active == "agent_a"
    assert tiny_pair.active == "agent_b"
    with torch.no_grad(), tiny_pair.reference() as model:
        bare = model(input_ids=X).logits
    assert tiny_pair.active == "agent_b"
    # A plain forward after the block (no use()) must run agent_b again, not the disabled base.
    with torch.no_grad():
        after = tiny_pair.model(input_ids=X).logits
    assert torch.equal(after, b) and not torch.allclose(after, bare, atol=1e-4)


def test_state_dict_roundtrip_and_mismatch(tiny_pair):
    sd = tiny_pair.adapter_state_dict("agent_b")
    target = _logits(tiny_pair, "agent_b", X)
    assert not torch.allclose(_logits(tiny_pair, "agent_a", X), target)
    tiny_pair.load_adapter_state_dict("agent_a", sd)
    assert torch.allclose(_logits(tiny_pair, "agent_a", X), target)
    # The copy is detached: changing the model does not change a taken state dict.
    with torch.no_grad():
        tiny_pair.parameters("agent_b")[0].add_(1.0)
    assert not torch.equal(sd[next(iter(sd))], tiny_pair.adapter_state_dict("agent_b")[next(iter(sd))])
    with pytest.raises(ValueError, match="state mismatch"):
        tiny_pair.load_adapter_state_dict("agent_a", {k: v for k, v in list(sd.items())[1:]})


def test_save_and_load_folder(tiny_pair, tmp_path):
    folder = tmp_path / "ckpt" / "agent_b"
    tiny_pair.save("agent_b", folder)
    tiny_pair.save("agent_b", folder)  # overwriting an existing folder works
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in folder.iterdir()}
    assert [p.name for p in folder.parent.iterdir()] == ["agent_b"]  # no temp folders left
    target = _logits(tiny_pair, "agent_b", X)

    fresh = SharedBase.from_source("tiny")
    fresh.load("agent_b", folder)  # creates the adapter from the saved spec
    assert fresh.specs["agent_b"].init_b_std == 0.05
    assert torch.allclose(_logits(fresh, "agent_b", X), target)
    with pytest.raises(FileNotFoundError):
        fresh.load("agent_b", tmp_path)


def test_saved_folder_loads_with_plain_peft(tiny_pair, tmp_path):
    from peft import PeftModel

    from agon_env.agents.tiny import build_tiny

    tiny_pair.save("agent_a", tmp_path / "a")
    target = _logits(tiny_pair, "agent_a", X)
    model, _ = build_tiny()
    peft_model = PeftModel.from_pretrained(model, str(tmp_path / "a"))
    with torch.no_grad():
        assert torch.allclose(peft_model(input_ids=X).logits, target, atol=1e-6)
