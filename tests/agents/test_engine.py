"""The HF generation engine (agents/engine.py): requests join at the next step, leave when done or
cancelled (their KV freed within one step), and a seeded request answers the same alone or in a burst."""

from __future__ import annotations

import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agon_env.agents import engine as E
from agon_env.agents.aborting import Abort, Aborted, aborting
from agon_env.agents.engine import CANCELLED, MIXED, PRUNE_MIN, Request, engine_for
from agon_env.agents.hf_backend import HFBackend
from agon_env.agents.protocol import SamplingParams
from agon_env.vocabulary import REFERENCE

PROMPTS = ["What is 3 + 4?", "Verify the draft and re-derive the result.", "hi", "0 1 2"]
SAMPLED = SamplingParams(max_new_tokens=16, temperature=1.0, stop=())


def request(backend: HFBackend, prompt: str, adapter: str, seed: int, params=SAMPLED) -> Request:
    gen = torch.Generator().manual_seed(seed)
    return Request(backend._encode(prompt), params, adapter, gen, own_generator=True)


def answered_alone(engine, rows: list[Request]) -> list[list[int]]:
    """Each row's tokens, generated with the engine to itself (what a burst must reproduce)."""
    for r in rows:
        engine.run([[r]])
    return [r.out_ids for r in rows]


def test_a_request_abandoned_mid_batch_frees_its_slot_within_one_step(tiny_pair):
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    params = SamplingParams(max_new_tokens=50, temperature=1.0, stop=())
    keep, drop = (request(backend, p, "agent_a", i, params) for i, p in enumerate(PROMPTS[:2]))
    engine.submit([keep, drop])
    for _ in range(3):
        engine.step()
    assert engine.running == [keep, drop] and len(drop.out_ids) == 3
    drop.cancel()
    cancelled_at = engine.steps
    engine.step()
    # gone at the very next step: out of the running batch, its KV rows freed, no token more
    assert engine.running == [keep]
    assert drop.done and drop.finish == CANCELLED and drop.freed_at == cancelled_at
    assert len(drop.out_ids) == 3 and len(keep.out_ids) == 4
    assert all(layer.keys.shape[0] == 1 for layer in engine.batches[MIXED].cache.layers)
    while not keep.done:
        engine.step()
    assert engine.batches == {} and engine.backlog == 0


def test_a_request_joins_at_the_next_step_and_answers_as_it_would_alone(tiny_pair):
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    alone = []
    for i, p in enumerate(PROMPTS):
        r = request(backend, p, "agent_a" if i % 2 else "agent_b", 100 + i)
        engine.run([[r]])
        alone.append(r)
    # a burst: the first two start together, the others join while they decode, with other adapters
    burst = [
        request(backend, p, a.adapter, 100 + i) for i, (p, a) in enumerate(zip(PROMPTS, alone, strict=True))
    ]
    engine.submit(burst[:2])
    engine.step()
    engine.submit(burst[2:3])
    engine.step()
    assert len(burst[2].out_ids) == 1 and len(burst[0].out_ids) == 2  # joined at the next step
    engine.submit(burst[3:])
    engine.step()
    # running together (rows that met EOS have left): a batch per adapter, each stepped every step
    assert set(engine.running) == {r for r in burst if not r.done} and burst[3] in engine.running
    while engine.backlog:
        engine.step()
    for a, b in zip(alone, burst, strict=True):
        assert a.out_ids == b.out_ids
        assert torch.allclose(torch.tensor(a.out_lp), torch.tensor(b.out_lp), atol=1e-4)
    # every phase of those steps was timed, the joins' included; each merge counted once it closed
    assert {"weights", "prefill", "join", "forward", "sample", "drop"} <= set(engine.seconds)
    assert all(v > 0 for v in engine.seconds.values())
    assert engine.merges >= 2 and engine._weights is None


def test_concurrent_callers_share_steps_and_get_their_own_answers(tiny_pair):
    backend = HFBackend(tiny_pair)
    alone = [backend.generate([p], SAMPLED, "agent_a", seeds=[7])[0].completion_ids for p in PROMPTS]
    engine = engine_for(backend)
    before = engine.steps
    got: dict[int, list[int]] = {}

    def call(i: int) -> None:
        got[i] = backend.generate([PROMPTS[i]], SAMPLED, "agent_a", seeds=[7])[0].completion_ids

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(PROMPTS))] == alone
    # sequential calls would take the sum of the lengths in steps; shared steps take far fewer
    assert engine.steps - before < sum(len(x) for x in alone)


def test_an_abort_set_while_generating_ends_the_call_at_the_next_step(tiny_pair):
    backend = HFBackend(tiny_pair)
    abort = Abort()
    heard: list[int] = []

    def hear(row: int, text: str) -> None:
        heard.append(row)
        if len(heard) == 3:
            abort.set()

    params = SamplingParams(max_new_tokens=40, temperature=1.0, stop=())
    with aborting(abort), pytest.raises(Aborted):
        backend.generate(PROMPTS[:1], params, "agent_a", seeds=[3], stream=hear)
    assert len(heard) <= 4  # the token of the step that saw the abort at most
    assert engine_for(backend).backlog == 0


def test_a_row_that_joins_reads_the_prefix_the_batch_keeps_once(tiny_pair):
    """Rows of one adapter whose prompts start alike keep that prefix once; a later row starting
    with it joins on top of it (only its tail is prefilled) and answers as it would alone."""
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    few = "Worked example: 1 + 1 = 2. Worked example: 2 + 2 = 4. Now: "
    questions = [few + q for q in ("3 + 4?", "5 + 6?", "7 + 8?")]
    params = SamplingParams(max_new_tokens=12, temperature=1.0, stop=())
    alone = answered_alone(
        engine, [request(backend, q, "agent_a", 50 + i, params) for i, q in enumerate(questions)]
    )
    together = [request(backend, q, "agent_a", 50 + i, params) for i, q in enumerate(questions)]
    engine.submit(together[:2])
    engine.step()
    kept = engine.batches[MIXED].segments
    assert (
        len(kept) == 1 and len(kept[0][1]) >= 8 and engine.batches[MIXED].cache.shared_prefix(0) is not None
    )
    prefills = engine.prefills.total()
    engine.submit(together[2:])
    engine.step()
    batch = engine.batches[MIXED]
    assert together[2] in batch.rows and batch.segments == kept  # still kept once, not copied per row
    assert batch.cache.shared_prefix(0) is not None and engine.prefills.total() == prefills + 1
    while engine.backlog:
        engine.step()
    assert [r.out_ids for r in together] == alone


@pytest.mark.parametrize("ride", [True, False])
def test_arrivals_ride_the_decode_forward_and_answer_as_they_would_alone(tiny_pair, monkeypatch, ride):
    """An arrival whose prompt starts with a prefix the running batch keeps for its adapter is
    prefilled in the batch's decode forward (packed_forward): no forward of its own, its first
    token at the next step, and the tokens and log-probs it has alone. Off (``RIDE``), every
    arrival is a forward of its own and answers the same."""
    monkeypatch.setattr(E, "RIDE", ride)
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    few = "Worked example: 1 + 1 = 2. Worked example: 2 + 2 = 4. Now: "
    asked = [(few + f"{q} + {q % 5}?", a) for q, a in zip(range(3, 10), "aabbaba", strict=True)]
    params = SamplingParams(max_new_tokens=12, temperature=1.0, stop=())

    def rows() -> list[Request]:
        return [request(backend, q, f"agent_{a}", 70 + i, params) for i, (q, a) in enumerate(asked)]

    alone = rows()
    answered_alone(engine, alone)
    forwards: list[int] = []
    hook = backend.base.base_model.register_forward_pre_hook(
        lambda m, a, k: forwards.append(1), with_kwargs=True
    )
    burst = rows()
    engine.submit(burst[:2])  # agent_a's two: their prefix kept once
    engine.step()
    engine.submit(burst[2:4])  # agent_b's: a prefix of their own beside it, in a forward of their own
    engine.step()
    steps, before = engine.steps, len(forwards)
    engine.submit(burst[4:5])  # agent_a's prefix is kept: rides
    engine.step()
    assert (len(burst[4].out_ids) == 0) is ride  # riding, its first token comes at the next step
    engine.submit(burst[5:7])  # one of each adapter: both ride, in the same forward
    engine.step()
    # two decode forwards; not riding, three prefills besides (one per adapter and step)
    assert engine.steps - steps == 2 and len(forwards) - before == (2 if ride else 5)
    assert engine.rode.total() == (2 if ride else 0) and engine.rode[2] == (1 if ride else 0)
    while engine.backlog:
        engine.step()
    hook.remove()
    counts = engine.counts()  # what /health and serve_bench report
    assert counts["steps"] == engine.steps and counts["rode"] == engine.rode.total()
    assert counts["forwards"] == engine.forwards.total() and counts["prefills"] == engine.prefills.total()
    assert counts["mixed_forwards"] == sum(n for k, n in engine.forwards.items() if k > 1) > 0
    assert all(counts[f"seconds_{p}"] == engine.seconds[p] for p in E.PHASES)
    assert counts["seconds_forward"] > 0
    for a, b in zip(alone, burst, strict=True):
        assert a.out_ids == b.out_ids
        assert torch.allclose(torch.tensor(a.out_lp), torch.tensor(b.out_lp), atol=1e-4)


def test_a_joined_batch_frees_a_cancelled_row_in_place_and_the_next_arrival_takes_it(tiny_pair):
    """In a batch rows joined, a row that leaves is compacted away in place (the rows after it move
    down, nothing reallocated) and a later arrival is written into the row it freed; every row
    still answers as it would alone."""
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    params = SamplingParams(max_new_tokens=12, temperature=1.0, stop=())
    prompts = [PROMPTS[0], PROMPTS[1], PROMPTS[3], PROMPTS[0] + " Again."]
    alone = answered_alone(
        engine, [request(backend, p, "agent_a", 70 + i, params) for i, p in enumerate(prompts)]
    )
    rows = [request(backend, p, "agent_a", 70 + i, params) for i, p in enumerate(prompts)]
    gone = request(backend, PROMPTS[2], "agent_a", 99, params)
    engine.submit([rows[0]])
    engine.step()

    def allocation() -> int:
        return engine.batches[MIXED].cache.layers[0]._kr.untyped_storage().data_ptr()

    engine.submit([gone, rows[1]])
    engine.step()  # copied once, with a row to spare ...
    before = allocation()
    engine.submit([rows[2]])
    engine.step()  # ... which the next arrival takes
    batch = engine.batches[MIXED]
    assert batch.joined and batch.rows == [rows[0], gone, rows[1], rows[2]] and allocation() == before
    gone.cancel()
    engine.step()
    assert engine.batches[MIXED].rows == [rows[0], rows[1], rows[2]]
    assert engine.batches[MIXED].cache.layers[0].keys.shape[0] == 3
    assert allocation() == before  # moved down in place
    engine.submit([rows[3]])
    engine.step()
    assert engine.batches[MIXED].rows[-1] is rows[3] and allocation() == before  # took the freed row
    while engine.backlog:
        engine.step()
    assert [r.out_ids for r in rows] == alone and gone.finish == CANCELLED


def _forwards(base) -> list[int]:
    """A list that grows by one for every forward of ``base``'s model (prefills included)."""
    calls: list[int] = []
    base.model.register_forward_pre_hook(lambda *_: calls.append(1))
    return calls


def test_rows_of_two_adapters_share_one_batch_and_one_forward_per_step(tiny_pair):
    """A forward reads the weights once whatever its rows: a draft batch and an answer batch (two
    adapters) run as one batch, every row advancing at every step in one forward, and answer as
    they would alone (each row's own adapter: ``MergedSet.mix``)."""
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    params = SamplingParams(max_new_tokens=12, temperature=0, stop=())
    many = [request(backend, p, "agent_a", i, params) for i, p in enumerate(PROMPTS[:3])]
    one = request(backend, PROMPTS[3], "agent_b", 9, params)
    engine.submit(many)
    engine.submit([one])
    engine.step()  # both prefilled (one each), joined, sampled, one decode forward
    calls = _forwards(tiny_pair)
    for _ in range(4):
        engine.step()
    assert list(engine.batches) == [MIXED] and len(calls) == 4
    assert all(len(r.out_ids) == 5 for r in [*many, one] if not r.done)
    while engine.backlog:
        engine.step()
    for r in [*many, one]:
        alone = request(backend, backend.tokenizer.decode(r.ids), r.adapter, 0, params)
        alone.ids = r.ids
        engine.run([[alone]])
        assert alone.out_ids == r.out_ids
        assert torch.allclose(torch.tensor(alone.out_lp), torch.tensor(r.out_lp), atol=1e-4)


def test_adapters_that_cannot_mix_run_a_batch_each_the_other_waiting_at_most_max_wait(tiny_pair):
    """Sampled through peft (``merge=False``: also DoRA, a quantised base) each adapter has a
    batch of its own: the fuller one runs every step, the other joins it every MAX_WAIT + 1 steps
    (and at the step it takes new rows)."""
    from agon_env.agents.engine import MAX_WAIT

    backend = HFBackend(tiny_pair, merge=False)
    engine = engine_for(backend)
    params = SamplingParams(max_new_tokens=40, temperature=0, stop=())
    many = [request(backend, p, "agent_a", i, params) for i, p in enumerate(PROMPTS[:3])]
    one = request(backend, PROMPTS[3], "agent_b", 9, params)
    engine.submit(many)
    engine.submit([one])
    steps = 2 * (MAX_WAIT + 1)
    for _ in range(steps):
        engine.step()
    assert set(engine.batches) <= {"agent_a", "agent_b"}
    assert all(len(r.out_ids) == steps for r in many if not r.done)
    assert one.done or len(one.out_ids) == 1 + (steps - 1) // (MAX_WAIT + 1)
    while engine.backlog:
        engine.step()
    alone = request(backend, PROMPTS[3], "agent_b", 9, params)
    engine.run([[alone]])
    assert alone.out_ids == one.out_ids  # waiting changes when its tokens come, not which


def test_each_adapters_prefix_is_kept_once_beside_the_others_and_dropped_when_unread(tiny_pair):
    """A batch keeps the shared prefix of each adapter's prompts once, side by side (its bank):
    a row of either adapter that starts with its own prefills only its tail; a prefix no row reads
    any more is dropped at the next join; every row answers as it would alone."""
    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    drafts = "Worked example: 1 + 1 = 2. Worked example: 2 + 2 = 4. Now: "
    checks = "Check the draft below, then re-derive it step by step. Draft: "
    params = SamplingParams(max_new_tokens=6, temperature=1.0, stop=())
    long = SamplingParams(max_new_tokens=30, temperature=1.0, stop=())
    asked = [
        (drafts + "3 + 4?", "agent_a", params),
        (drafts + "5 + 6?", "agent_a", params),
        (checks + "7", "agent_b", long),
        (checks + "9", "agent_b", long),
        (checks + "11", "agent_b", long),
        ("hi", "agent_a", long),
    ]
    alone = []
    for i, (q, a, p) in enumerate(asked):
        r = request(backend, q, a, 70 + i, p)
        engine.run([[r]])
        alone.append(r)
    burst = [request(backend, q, a, 70 + i, p) for i, (q, a, p) in enumerate(asked)]
    engine.submit(burst[:2])
    engine.submit(burst[2:4])
    engine.step()
    batch = engine.batches[MIXED]
    assert [a for a, _ in batch.segments] == ["agent_a", "agent_b"]
    bank = batch.cache.shared_prefix(0)[0].shape[-2]
    assert bank == sum(len(t) for _, t in batch.segments)
    prefills = engine.prefills.total()
    engine.submit(burst[4:5])  # starts with agent_b's prefix: prefilled on top of it
    engine.step()
    batch = engine.batches[MIXED]
    assert engine.prefills.total() == prefills + 1 and batch.cache.shared_prefix(0)[0].shape[-2] == bank
    while not (burst[0].done and burst[1].done):
        engine.step()
    # agent_a's prefix has no reader left: dropped at the step its last row left
    batch = engine.batches[MIXED]
    assert [a for a, _ in batch.segments] == ["agent_b"]
    assert batch.cache.shared_prefix(0)[0].shape[-2] == len(batch.segments[0][1])
    engine.submit(burst[5:])  # no prefix of its own: joins with no bank columns to read
    while engine.backlog:
        engine.step()
        for batch in engine.batches.values():  # the mask covers exactly the cached columns
            assert batch.mask.shape[1] == batch.cache.get_seq_length()
            assert int((~batch.mask.bool().any(0)).sum()) < PRUNE_MIN  # unread: a little padding at most
    for a, b in zip(alone, burst, strict=True):
        assert a.out_ids == b.out_ids
        assert torch.allclose(torch.tensor(a.out_lp), torch.tensor(b.out_lp), atol=1e-4)


def test_the_engine_frees_its_merged_weights_when_it_goes_idle(tiny_pair):
    """The merged copy of the wrapped weights (about 0.4 GB for SmolLM2-135M in fp32) lives while
    rows generate and is freed, the base's own tensors pointed at again, when the engine goes idle:
    training's update reuses that memory, as ``MergedWeights`` with ``keep_buffers`` off did before
    rollouts ran on the engine."""
    from peft.tuners.lora import LoraLayer

    backend = HFBackend(tiny_pair)
    engine = engine_for(backend)
    layers = [m for m in tiny_pair._peft.modules() if isinstance(m, LoraLayer)]
    originals = [m.base_layer.weight.data_ptr() for m in layers]
    r = request(backend, PROMPTS[0], "agent_a", 0)
    engine.submit([r])
    engine.step()
    assert engine._weights is not None and "agent_a" in engine._weights.buffers
    assert [m.base_layer.weight.data_ptr() for m in layers] != originals  # the merged buffers
    while not r.done:
        engine.step()
    assert engine._weights is None
    assert [m.base_layer.weight.data_ptr() for m in layers] == originals


FAMILIES = (
    "Worked example: 1 + 1 = 2. Worked example: 2 + 2 = 4. Now: ",
    "Check the draft below, then re-derive it step by step. Draft: ",
    "",
)


@pytest.fixture(scope="module")
def mixing_pair():
    """``tiny_pair`` for a module's hypothesis examples: built once (function fixtures are not
    re-run per example), and each example's engine is empty when it ends."""
    from agon_env.agents.adapters import LoraSpec, SharedBase

    base = SharedBase.from_source("tiny")
    base.add_adapter("agent_a", LoraSpec(init_seed=1, init_b_std=0.05))
    base.add_adapter("agent_b", LoraSpec(init_seed=2, init_b_std=0.05))
    backend = HFBackend(base)
    alone: dict[tuple[str, str, int, int], Request] = {}
    return backend, alone


_arrival = st.tuples(
    st.integers(0, 2),  # prompt family
    st.sampled_from(["agent_a", "agent_b", REFERENCE]),
    st.integers(0, 40),  # the question
    st.integers(1, 9),  # max_new_tokens
    st.integers(0, 6),  # the step it arrives at
)


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrivals=st.lists(_arrival, min_size=1, max_size=7))
def test_any_schedule_of_arrivals_answers_each_row_as_it_would_alone(mixing_pair, arrivals):
    """Rows of any adapters and prompt families, arriving at any steps, in one running batch
    (prefixes kept once side by side, dropped and cut as rows leave): every row samples the
    tokens it samples alone, with the same log-probs up to float round-off."""
    answers_as_alone(mixing_pair, arrivals)


_riding = st.tuples(
    st.integers(0, 1),  # the two families with a prefix: later arrivals ride on it
    st.sampled_from(["agent_a", "agent_b"]),
    st.integers(0, 40),
    st.integers(4, 12),  # long enough for the batch to be running when they arrive
    st.integers(0, 8),
)


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrivals=st.lists(_riding, min_size=3, max_size=10))
def test_any_schedule_of_riding_arrivals_answers_each_row_as_it_would_alone(mixing_pair, arrivals):
    """The same law where most arrivals start with a prefix the batch keeps for their adapter, so
    they are prefilled in its decode forwards (packed_forward), several at once, of any adapters."""
    answers_as_alone(mixing_pair, arrivals)


def answers_as_alone(mixing_pair, arrivals) -> None:
    backend, alone = mixing_pair
    engine = engine_for(backend)

    def make(family: int, adapter: str, q: int, most: int) -> Request:
        params = SamplingParams(max_new_tokens=most, temperature=1.0, stop=())
        return request(backend, f"{FAMILIES[family]}{q} + {q % 7}?", adapter, 1000 + q, params)

    for family, adapter, q, most, _ in arrivals:
        key = (FAMILIES[family], adapter, q, most)
        if key not in alone:
            alone[key] = make(family, adapter, q, most)
            engine.run([[alone[key]]])
    rows = [(at, make(f, a, q, m), (FAMILIES[f], a, q, m)) for f, a, q, m, at in arrivals]
    step = 0
    while step <= 8 or engine.backlog:
        for at, r, _ in rows:
            if at == step:
                engine.submit([r])
        if engine.backlog:
            engine.step()
        for batch in engine.batches.values():
            assert batch.mask.shape[1] == batch.cache.get_seq_length()
        step += 1
    for _, r, key in rows:
        assert r.out_ids == alone[key].out_ids
        assert torch.allclose(torch.tensor(r.out_lp), torch.tensor(alone[key].out_lp), atol=1e-4)
