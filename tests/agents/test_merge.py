"""Merged-adapter sampling and grouped-KV attention: faster, and the same tokens."""

from __future__ import annotations

import warnings

import pytest
import torch

from agon_env.agents import HFBackend, LoraSpec, SamplingParams, packed_head
from agon_env.agents import attention as A
from agon_env.agents import merge as M
from agon_env.agents.engine import engine_for
from agon_env.vocabulary import REFERENCE

PROMPTS = ["What is 17 + 25?", "Verify the draft.", "0 1 2"]
needs_onednn = pytest.mark.skipif(
    not packed_head.packs(torch.zeros(1)), reason="this torch has no oneDNN linear"
)
GREEDY = SamplingParams(max_new_tokens=10, temperature=0, stop=())
SAMPLED = SamplingParams(max_new_tokens=10, temperature=1.0, stop=())


def _run(base, merge, params, name):
    outs = HFBackend(base, merge=merge).generate(PROMPTS, params, adapter=name, seeds=[1, 2, 3])
    return [o.completion_ids for o in outs], torch.tensor([lp for o in outs for lp in o.logprobs])


@pytest.mark.parametrize("params", [GREEDY, SAMPLED])
@pytest.mark.parametrize("name", ["agent_a", "agent_b", REFERENCE])
def test_merged_sampling_gives_the_unmerged_tokens_and_logprobs(tiny_pair, params, name):
    ids, lp = _run(tiny_pair, False, params, name)
    ids_m, lp_m = _run(tiny_pair, True, params, name)
    assert ids == ids_m
    assert torch.allclose(lp, lp_m, atol=1e-5)


def test_many_merge_cycles_leave_base_and_adapters_bitwise_equal(tiny_pair):
    before = {n: p.detach().clone() for n, p in tiny_pair.model.named_parameters()}
    backend = HFBackend(tiny_pair)
    for i in range(20):
        backend.generate(PROMPTS[:1], GREEDY, adapter=["agent_a", "agent_b"][i % 2])
    after = dict(tiny_pair.model.named_parameters())
    assert all(torch.equal(v, after[n]) for n, v in before.items())
    # ... and a plain forward still runs the adapter through peft, on the pristine weights
    x = torch.tensor([[5, 17, 60]])
    with torch.no_grad():
        with tiny_pair.use("agent_a") as model:
            adapted = model(input_ids=x).logits
        with tiny_pair.reference() as model:
            assert not torch.allclose(adapted, model(input_ids=x).logits, atol=1e-4)


@pytest.mark.parametrize(
    ("extra", "reason"), [({"use_dora": True}, "a DoRA adapter"), ({"lora_bias": True}, "a LoRA bias")]
)
def test_an_adapter_that_cannot_merge_exactly_samples_unmerged_with_a_warning(tiny_base, extra, reason):
    tiny_base.add_adapter("odd", LoraSpec(init_seed=3, init_b_std=0.05, extra=extra))
    ids, lp = _run(tiny_base, False, GREEDY, "odd")
    with pytest.warns(UserWarning, match=f"cannot merge 'odd' exactly: {reason}"):
        ids_m, lp_m = _run(tiny_base, True, GREEDY, "odd")
    assert ids == ids_m and torch.equal(lp, lp_m)


def test_grouped_kv_attention_is_exact_and_skips_repeat_kv(tiny_pair, monkeypatch):
    model = tiny_pair.base_model
    assert model.config._attn_implementation == A.NAME  # load_base switched it
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    tok = tiny_pair.tokenizer
    batch = tok(PROMPTS, return_tensors="pt", padding=True)  # left padding: a mask is passed
    with torch.no_grad():
        ours = model(**batch).logits
        model.set_attn_implementation("sdpa")
        stock = model(**batch).logits
        model.set_attn_implementation(A.NAME)
    assert torch.equal(ours, stock)
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional,
        "scaled_dot_product_attention",
        lambda *a, **k: calls.append(k.get("enable_gqa")) or sdpa(*a, **k),
    )
    with torch.no_grad():
        model(**batch)
    assert calls and all(calls)  # every layer: grouped heads, no expanded cache


def test_grouped_kv_attention_gives_the_same_gradients(tiny_pair):
    """The update's forward and backward run through it too (a mask is always passed)."""
    from agon_env.algorithms.logprobs import completion_logprobs

    tok = tiny_pair.tokenizer
    prompts = [tok.encode(p) for p in PROMPTS]
    completions = [tok.encode(" <answer>42</answer>"), tok.encode(" 12"), tok.encode(" so it is")]
    param = tiny_pair.parameters("agent_a")[0]

    def grad(impl):
        tiny_pair.base_model.set_attn_implementation(impl)
        param.grad = None
        with tiny_pair.use("agent_a") as model:
            completion_logprobs(model, prompts, completions, pad_id=tok.pad_token_id).sum().backward()
        return param.grad.clone()

    try:
        assert torch.allclose(grad(A.NAME), grad("sdpa"), atol=1e-6)
    finally:
        tiny_pair.base_model.set_attn_implementation(A.NAME)


def test_a_merged_set_switches_adapters_by_pointer_and_restores_the_base_bitwise(tiny_pair):
    """The engine's MergedSet: each adapter's forward equals MergedWeights' merged one, switching
    back and forth re-merges nothing, and closing leaves the base weights bitwise untouched."""
    from agon_env.agents.merge import MergedSet

    model = tiny_pair.model
    ids = torch.tensor([[5, 6, 7, 8]])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    expected = {}
    with torch.inference_mode():
        for name in ("agent_a", "agent_b"):
            with tiny_pair.sampling(name):
                expected[name] = model(input_ids=ids).logits
        merged = MergedSet(tiny_pair._peft)
        for name in ("agent_a", "agent_b", "agent_a"):
            merged.use(name)
            assert torch.equal(model(input_ids=ids).logits, expected[name])
        merged.use(None)  # the base: every layer on its own weights, adapters off
        with tiny_pair.use(REFERENCE):
            base_logits = model(input_ids=ids).logits
        assert torch.equal(model(input_ids=ids).logits, base_logits)
        assert set(merged.buffers) == {"agent_a", "agent_b"}  # merged once each
        merged.close()
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n


def test_a_merged_weight_is_laid_out_input_major_on_cpu_with_the_same_sums():
    """``merged_sum``: on CPU the layer sees the transpose of a contiguous ``[in, out]`` buffer
    (MKL's faster operand at decode shapes); every entry is the plain sum, and a reused buffer
    is filled in place."""
    w, delta = torch.randn(48, 16), torch.randn(48, 16)
    merged = M.merged_sum(w, delta)
    assert merged.shape == w.shape and merged.t().is_contiguous() and not merged.is_contiguous()
    assert torch.equal(merged, w + delta)
    again = M.merged_sum(w, -delta, out=merged)
    assert again.data_ptr() == merged.data_ptr() and torch.equal(again, w - delta)
    x = torch.randn(8, 16)
    assert torch.allclose(torch.nn.functional.linear(x, again), x @ (w - delta).t(), atol=1e-5)


@pytest.mark.parametrize("input_major", [True, False])
@pytest.mark.parametrize("adapter_dtype", [torch.float32, torch.float64])
def test_merged_weight_is_the_base_plus_the_scaled_product_in_the_merged_layout(
    tiny_pair, input_major, adapter_dtype, monkeypatch
):
    """``merged_weight``: every wrapped layer's merge is ``W + s · B A`` (peft's
    ``get_delta_weight`` added to the base) to float round-off, in :func:`merged_sum`'s layout, into
    a reused buffer in place; an adapter in another dtype than the base is merged peft's way,
    bit for bit."""
    monkeypatch.setattr(M, "INPUT_MAJOR", input_major)
    layers = [m for m in tiny_pair._peft.modules() if hasattr(m, "lora_A") and "agent_a" in m.lora_A]
    assert layers
    for m in layers:
        m.lora_B["agent_a"].weight.data.normal_(0, 0.1)  # a fresh adapter's B is zero: nothing to add
        if adapter_dtype != torch.float32:
            m.lora_A["agent_a"].to(adapter_dtype), m.lora_B["agent_a"].to(adapter_dtype)
    for m in layers:
        w = m.base_layer.weight.data
        peft_way = w + m.get_delta_weight("agent_a").to(w.dtype)
        merged = M.merged_weight(m, "agent_a", w)
        assert merged.shape == w.shape and merged.t().is_contiguous() == input_major
        if adapter_dtype == torch.float32:
            torch.testing.assert_close(merged, peft_way, rtol=0, atol=1e-6)
        else:
            assert torch.equal(merged, peft_way)
        again = M.merged_weight(m, "agent_a", w, out=merged)
        assert again.data_ptr() == merged.data_ptr() and torch.equal(again, merged)


def _logits(base, adapter, ids):
    with base.use(adapter), torch.inference_mode():
        return base.model(input_ids=ids).logits


@pytest.mark.parametrize(
    "rows",
    [
        ["agent_a", "agent_b", None, "agent_a"],
        ["agent_b", "agent_a", "agent_b"],
        ["agent_b"],
        [None, "agent_b", None],
    ],
)
@pytest.mark.parametrize("packed", [False, pytest.param(True, marks=needs_onednn)])
def test_mixed_rows_get_each_their_own_adapter_in_one_forward(tiny_pair, rows, packed, monkeypatch):
    """``MergedSet.mix``: one forward over rows of several adapters (and the base) gives each row
    what peft's forward with that row's adapter alone gives, up to float round-off: the adapter
    with the most rows merged in, each other row adding its own update and taking the anchor's
    away. ``packed``: with the anchor's merged weights run packed."""
    if packed:
        monkeypatch.setattr(M, "PACK_MIN_NUMEL", 0)
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (len(rows), 5))
    alone = torch.cat(
        [_logits(tiny_pair, REFERENCE if n is None else n, ids[i : i + 1]) for i, n in enumerate(rows)]
    )
    weights = M.MergedSet(tiny_pair._peft)
    try:
        weights.mix(rows)
        with torch.inference_mode():
            mixed = tiny_pair.model(input_ids=ids).logits
        weights.use("agent_a")  # back to merged: the hooks add nothing more
        with torch.inference_mode():
            merged = tiny_pair.model(input_ids=ids).logits
    finally:
        weights.close()
    assert torch.allclose(mixed, alone, atol=1e-5)
    assert torch.allclose(merged, _logits(tiny_pair, "agent_a", ids), atol=1e-5)
    assert not any(m._forward_hooks for m in weights.layers)  # closed: no hook left


def _packed_calls(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.count for e in prof.key_averages() if e.key == "mkldnn::_linear_pointwise")


@needs_onednn
def test_large_merged_weights_run_packed_while_open_and_give_the_merged_logits(tiny_pair, monkeypatch):
    """With every merged weight large enough to pack (``PACK_MIN_NUMEL`` 0 on the tiny model), a
    merged layer runs oneDNN's product on the packed copy of its own merge, in the base layout,
    from ``MIN_ROWS`` rows on (``F.linear`` below); the base (``use(None)``) runs ``F.linear`` on
    the base weights, and a closed set gives every layer peft's own ``forward`` back."""
    monkeypatch.setattr(M, "PACK_MIN_NUMEL", 0)
    model, rows = tiny_pair.model, packed_head.MIN_ROWS
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (rows, 5))
    want = _logits(tiny_pair, "agent_a", ids)
    weights = M.MergedSet(tiny_pair._peft)
    try:
        with torch.inference_mode():
            weights.use("agent_a")
            assert all("forward" in m.__dict__ for m in weights.layers)
            assert all(m.base_layer.weight.is_contiguous() for m in weights.layers)
            assert _packed_calls(lambda: model(input_ids=ids)) == len(weights.layers)
            got = model(input_ids=ids).logits
            assert _packed_calls(lambda: model(input_ids=ids[:1, :1])) == 0  # one row: F.linear
            weights.use(None)
            assert _packed_calls(lambda: model(input_ids=ids)) == 0
            base = model(input_ids=ids).logits
    finally:
        weights.close()
    assert not any("forward" in m.__dict__ for m in weights.layers)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    with torch.inference_mode(), tiny_pair._peft.disable_adapter():
        assert torch.equal(base, model(input_ids=ids).logits)  # peft's forward, adapters off: the same bits


def test_open_layers_run_straight_on_their_weights_with_the_same_bits(tiny_pair, monkeypatch):
    """While open, a wrapped ``nn.Linear`` runs its product without peft's ``forward`` (the class
    docstring's Direct): the logits of each adapter and of the base are bitwise those of a
    :class:`MergedWeights` block (peft's forward, adapters off, on the same merged weights)."""
    monkeypatch.setattr(M, "PACKED_LINEARS", False)  # F.linear on both sides: bitwise comparable
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (3, 6))
    calls: list[str] = []
    monkeypatch.setattr(type(_a_lora_layer(tiny_pair)), "forward", _counting(calls))
    want = {}
    for name in ("agent_a", "agent_b"):
        with torch.inference_mode(), M.MergedWeights().merged(tiny_pair._peft, name) as merged:
            assert merged
            want[name] = tiny_pair.model(input_ids=ids).logits
    with torch.inference_mode(), tiny_pair._peft.disable_adapter():
        want[None] = tiny_pair.model(input_ids=ids).logits
    assert calls  # peft's forward ran for those
    calls.clear()
    weights = M.MergedSet(tiny_pair._peft)
    try:
        with torch.inference_mode():
            for name in ("agent_a", None, "agent_b", "agent_a"):
                weights.use(name)
                assert torch.equal(tiny_pair.model(input_ids=ids).logits, want[name]), name
    finally:
        weights.close()
    assert not calls  # ... and never while the set was open


def _disables(monkeypatch, peft) -> list[int]:
    calls: list[int] = []
    own = type(peft).disable_adapter
    monkeypatch.setattr(type(peft), "disable_adapter", lambda self: calls.append(1) or own(self))
    return calls


def test_peft_is_not_asked_to_switch_adapters_off_when_no_module_runs_through_it(tiny_pair, monkeypatch):
    """Every LoRA layer of the pair wraps an ``nn.Linear``, so none runs peft's forward while the
    set is open: peft's ``disable_adapter`` (a survey of every layer) is not called, and peft's
    adapters are on again, untouched, once closed."""
    calls = _disables(monkeypatch, tiny_pair._peft)
    weights = M.MergedSet(tiny_pair._peft)
    try:
        with torch.inference_mode():
            weights.use("agent_a")
            weights.use(None)
    finally:
        weights.close()
    assert not calls
    assert not any(m.disable_adapters for m in weights.layers)


def test_a_module_that_runs_through_peft_has_its_adapters_switched_off(tiny_pair, monkeypatch):
    """An adapter on the embeddings (a LoRA layer around an ``nn.Embedding``, run by peft) would add
    peft's active adapter to a merged forward: with one in the model, the set switches peft's
    adapters off, and ``agent_a`` merged gives what it gives without that adapter's layer."""
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (3, 6))
    with torch.inference_mode(), M.MergedWeights().merged(tiny_pair._peft, "agent_a") as merged:
        assert merged
        want = tiny_pair.model(input_ids=ids).logits
    with warnings.catch_warnings():  # the tiny model ties its head to the embeddings: peft warns
        warnings.simplefilter("ignore")
        tiny_pair.add_adapter("embeds", LoraSpec(init_seed=5, target_modules=["embed_tokens"]))
    with torch.no_grad():  # peft starts an embedding's update at zero: give it some size
        for m in tiny_pair._peft.modules():
            if "embeds" in getattr(m, "lora_embedding_A", {}):
                m.lora_embedding_A["embeds"].normal_(0, 0.5)
                m.lora_embedding_B["embeds"].normal_(0, 0.5)
    tiny_pair._peft.set_adapter("embeds")  # peft's active adapter: would run in the embeddings
    with torch.inference_mode():
        assert not torch.allclose(tiny_pair.model(input_ids=ids).logits, want, atol=1e-3)  # it would show
    calls = _disables(monkeypatch, tiny_pair._peft)
    weights = M.MergedSet(tiny_pair._peft)
    try:
        with torch.inference_mode():
            weights.use("agent_a")
            got = tiny_pair.model(input_ids=ids).logits
    finally:
        weights.close()
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert calls == [1]


def _a_lora_layer(pair):
    from peft.tuners.lora import LoraLayer

    return next(m for m in pair._peft.modules() if isinstance(m, LoraLayer))


def _counting(calls):
    from peft.tuners.lora import Linear

    own = Linear.forward

    def forward(self, x, *args, **kwargs):
        calls.append("peft")
        return own(self, x, *args, **kwargs)

    return forward


@needs_onednn
@pytest.mark.parametrize("params", [GREEDY, SAMPLED])
def test_packed_merged_weights_sample_the_same_tokens(tiny_pair, params, monkeypatch):
    """The engine with every merged weight packed samples what it samples with none packed, the
    log-probs within round-off."""
    monkeypatch.setattr(M, "PACK_MIN_NUMEL", 0)
    prompts = PROMPTS * 2  # past MIN_ROWS rows, so decode steps run packed too
    runs = []
    for on in (True, False):
        monkeypatch.setattr(M, "PACKED_LINEARS", on)
        outs = HFBackend(tiny_pair).generate(prompts, params, adapter="agent_b", seeds=list(range(6)))
        runs.append(outs)
    assert [o.completion_ids for o in runs[0]] == [o.completion_ids for o in runs[1]]
    for a, b in zip(*runs, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-4)


def test_mixing_leaves_base_and_adapters_bitwise_equal(tiny_pair):
    before = {n: p.detach().clone() for n, p in tiny_pair.model.named_parameters()}
    weights = M.MergedSet(tiny_pair._peft)
    for names in (["agent_a", "agent_b"], ["agent_b", None], ["agent_a"]):
        weights.mix(names)
        with torch.inference_mode():
            tiny_pair.model(input_ids=torch.tensor([[1, 2, 3]] * len(names)))
    weights.close()
    after = dict(tiny_pair.model.named_parameters())
    assert all(torch.equal(v, after[n]) for n, v in before.items())


def _adapter_params(base, name):
    return [p for n, p in base.model.named_parameters() if "lora_" in n and f".{name}." in n]


def _engine_store(backend):
    return engine_for(backend).store


def test_a_kept_merge_serves_later_calls_unchanged_and_gives_the_same_tokens(tiny_pair):
    kept = HFBackend(tiny_pair, keep_merged=2)
    fresh = HFBackend(tiny_pair)
    for _ in range(3):
        for name in ("agent_a", "agent_b"):
            got = kept.generate(PROMPTS, SAMPLED, adapter=name, seeds=[1, 2, 3])
            want = fresh.generate(PROMPTS, SAMPLED, adapter=name, seeds=[1, 2, 3])
            assert [o.completion_ids for o in got] == [o.completion_ids for o in want]
            assert [o.logprobs for o in got] == [o.logprobs for o in want]
    assert _engine_store(kept).merges == 2  # one per adapter, whatever the number of calls
    assert _engine_store(fresh) is None  # training's default keeps nothing
    assert engine_for(kept).merges == 2 and engine_for(fresh).merges == 6


@pytest.mark.parametrize("packed", [False, pytest.param(True, marks=needs_onednn)])
@pytest.mark.parametrize("change", ["optimizer step", "data copy", "scale"])
def test_a_kept_merge_is_merged_again_into_the_same_buffers_after_any_change(
    tiny_pair, change, packed, monkeypatch
):
    """``packed``: every merged weight runs packed, and is packed again after the change."""
    if packed:
        monkeypatch.setattr(M, "PACK_MIN_NUMEL", 0)
    kept = HFBackend(tiny_pair, keep_merged=2)
    kept.generate(PROMPTS[:1], GREEDY, adapter="agent_a")
    store = _engine_store(kept)
    buffers = [b for b in store._kept["agent_a"].buffers if b is not None]
    params = _adapter_params(tiny_pair, "agent_a")
    if change == "optimizer step":
        opt = torch.optim.AdamW(params, lr=0.05)
        with tiny_pair.use("agent_a"):
            loss = tiny_pair.model(input_ids=torch.tensor([[5, 6, 7]])).logits.square().mean()
        loss.backward()
        opt.step()
    elif change == "data copy":  # .data shares no version counter: only the exact compare sees it
        params[0].data.copy_(params[0].data + 0.5)
    else:
        for m in M.MergedSet(tiny_pair._peft).layers:
            m.scaling["agent_a"] *= 2
    got = kept.generate(PROMPTS, GREEDY, adapter="agent_a")
    want = HFBackend(tiny_pair).generate(PROMPTS, GREEDY, adapter="agent_a")
    assert [o.completion_ids for o in got] == [o.completion_ids for o in want]
    assert [o.logprobs for o in got] == [o.logprobs for o in want]
    assert store.merges == 2
    after = [b for b in store._kept["agent_a"].buffers if b is not None]
    assert [b.data_ptr() for b in after] == [b.data_ptr() for b in buffers]  # refilled, not reallocated


def test_a_store_keeps_its_size_and_never_refills_buffers_in_use(tiny_pair):
    model, ids = tiny_pair.model, torch.tensor([[5, 6, 7, 8]])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tiny_pair.add_adapter("agent_c", LoraSpec(init_seed=3, init_b_std=0.05))
    store = M.MergeStore(1)
    with torch.inference_mode():
        expected = {}
        for name in ("agent_a", "agent_b", "agent_c"):
            with tiny_pair.sampling(name):
                expected[name] = model(input_ids=ids).logits
        merged = M.MergedSet(tiny_pair._peft, store)
        for name in ("agent_a", "agent_b", "agent_a"):  # both in use at once: both kept meanwhile
            merged.use(name)
            assert torch.equal(model(input_ids=ids).logits, expected[name])
        assert "agent_a" in store and "agent_b" in store
        merged.close()
        assert list(store._kept) == ["agent_a"]  # the most recently used one
        merged = M.MergedSet(tiny_pair._peft, store)
        merged.use("agent_c")  # a newcomer takes the idle one's buffers
        assert torch.equal(model(input_ids=ids).logits, expected["agent_c"])
        merged.use("agent_a")  # merged again: agent_c's buffers are in use
        assert torch.equal(model(input_ids=ids).logits, expected["agent_a"])
        merged.use("agent_c")
        assert torch.equal(model(input_ids=ids).logits, expected["agent_c"])
        merged.close()
    assert store.merges == 4 and len(store._kept) == 1
    for n, p in model.named_parameters():
        if n in before:
            assert torch.equal(p, before[n]), n
    with pytest.raises(ValueError, match="at least one"):
        M.MergeStore(0)
