"""Several batches' forwards as one (agents/packed_forward.py): each batch's logits and cache as its
own forward gives them, up to float round-off."""

from __future__ import annotations

import torch

from agon_env.agents import SharedBase
from agon_env.agents import packed_forward as P
from agon_env.agents.engine import num_layers
from agon_env.agents.kv_cache import BufferCache


def _prefilled(model, rows: list[list[int]]) -> tuple[P.Part, torch.Tensor]:
    """``rows`` prefilled in a cache of their own (:func:`_fresh`); the next step's decode part and
    the logits of each row's last token."""
    part = _fresh(model, rows)
    logits = _alone(model, part)
    step = P.Part(
        logits.argmax(-1)[:, None],
        torch.cat([part.mask, part.mask.new_ones(len(rows), 1)], -1),
        part.positions[:, -1:] + 1,
        part.cache,
    )
    return step, logits


def _fresh(model, rows: list[list[int]]) -> P.Part:
    """``rows`` left-padded, as a prefill of their own is given them, with an empty cache."""
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, width - len(r) :], mask[b, width - len(r) :] = torch.tensor(r), 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return P.Part(ids, mask, positions, BufferCache(num_layers(model), width + 8))


def _alone(model, part: P.Part) -> torch.Tensor:
    out = model(
        input_ids=part.ids,
        attention_mask=part.mask,
        position_ids=part.positions,
        past_key_values=part.cache,
        use_cache=True,
    )
    return out.logits[:, -1]


@torch.inference_mode()
def test_a_decode_step_and_two_prefills_packed_give_each_its_own_forwards_logits_and_cache():
    model = SharedBase.from_source("tiny").base_model.eval()
    assert P.packable(model)
    running = [[5, 6, 7, 8, 9], [11, 12, 13]]  # left-padded: the mask and positions must hold
    arrivals = ([[21, 22, 23, 24]], [[31, 32], [41, 42, 43, 44, 45, 46]])

    step, _ = _prefilled(model, running)
    separate = [_alone(model, step)] + [_alone(model, _fresh(model, rows)) for rows in arrivals]
    caches = [step.cache]

    step2, _ = _prefilled(model, running)
    parts = [step2] + [_fresh(model, rows) for rows in arrivals]
    packed = P.forward(model, parts)

    assert [x.shape for x in packed] == [x.shape for x in separate]
    for got, want in zip(packed, separate, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # every part's keys and values went into its own cache, where its own forward writes them
    layer = num_layers(model) - 1
    torch.testing.assert_close(
        step2.cache.layers[layer].keys, caches[0].layers[layer].keys, rtol=1e-5, atol=1e-5
    )
    for part, rows in zip(parts[1:], arrivals, strict=True):
        alone = _fresh(model, rows)
        _alone(model, alone)
        torch.testing.assert_close(part.cache.layers[layer].values, alone.cache.layers[layer].values)
        assert part.cache.get_seq_length() == part.ids.shape[1]


def test_a_model_not_on_agon_sdpa_is_not_packable():
    model = SharedBase.from_source("tiny").base_model
    model.set_attn_implementation("eager")
    assert not P.packable(model)
