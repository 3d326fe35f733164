"""What a latent span's cache carries: the summary alone, or the whole draft before it (issue 41)."""

from __future__ import annotations

import torch

# Through agon_env.agents.latent (which takes the config): the same import on every commit since
# the span existed, so on one without the own-pass span the test fails on what the cache holds.
from agon_env.agents.latent import DraftRecord, LatentConfig, compute_prefixes

ANSWER = " <answer>4</answer>"


def _draft(tok, reasoning):
    """A draft record: a prompt, then ``reasoning``, the same summary and the same answer block."""
    parts = ("Solve 2+2.", reasoning, "<summary>added two and two</summary>", ANSWER)
    prompt, *completion = (tok(p, add_special_tokens=False)["input_ids"] for p in parts)
    return DraftRecord("agent_a", tuple(prompt), tuple(i for ids in completion for i in ids))


def test_the_summary_span_is_the_summary_alone_and_in_context_is_the_whole_draft(tiny_pair):
    """Issue 41: two drafts with the same summary and different reasoning. The ``summary`` span
    is encoded on its own, so both get the same cache, at positions 0 … n − 1 (where the
    challenger's tokens then continue); ``summary-in-context`` keeps the same tokens' states from
    a pass over the whole draft, so the reasoning shows in them: the caches differ."""
    tok = tiny_pair.tokenizer
    a = _draft(tok, "first 2+2 is 4. ")
    b = _draft(tok, "two plus two makes four, so the sum is four. ")
    n = len(tok("<summary>added two and two</summary>", add_special_tokens=False)["input_ids"])
    tail = len(tok(ANSWER, add_special_tokens=False)["input_ids"])
    own = compute_prefixes(tiny_pair, [a, b], LatentConfig(span="summary"))
    for x, y in zip((*own[0].values, *own[0].keys), (*own[1].values, *own[1].keys), strict=True):
        assert torch.allclose(x, y, atol=1e-6)
    assert [(p.start, p.length, p.end) for p in own] == [(0, n, n)] * 2
    ctx = compute_prefixes(tiny_pair, [a, b], LatentConfig(span="summary-in-context"))
    # The same n tokens at their places in each draft (prompt + reasoning before them) ...
    places = [len(r.prompt_ids) + len(r.completion_ids) - tail - n for r in (a, b)]
    assert [(p.start, p.length) for p in ctx] == [(place, n) for place in places]
    # ... whose values (never rotated: position alone cannot make them differ) carry the reasoning.
    assert (ctx[0].values[-1] - ctx[1].values[-1]).abs().max() > 1e-3
    assert not torch.allclose(ctx[0].values[-1], own[0].values[-1], atol=1e-3)


def test_the_update_reads_the_own_pass_summary_cache_as_the_sampler_did(tiny_pair):
    """The challenger samples on the ``summary`` span's own-pass cache (positions 0 … n − 1, its
    prompt from n); the update's log-probs, on the same stored prefix, match to round-off."""
    from agon_env.agents import HFBackend
    from agon_env.agents.latent import PREFIX, generate_with_prefixes
    from agon_env.agents.protocol import SamplingParams
    from agon_env.algorithms.latent_logprobs import latent_logprobs

    tok = tiny_pair.tokenizer
    drafts = [_draft(tok, "first 2+2 is 4. "), _draft(tok, "so the sum is four. ")]
    prefixes = compute_prefixes(tiny_pair, drafts, LatentConfig(span="summary"))
    params = SamplingParams(temperature=1.0, max_new_tokens=8, seed=3)
    got = generate_with_prefixes(
        HFBackend(tiny_pair), ["Check it.", "Is 2+2 4?"], prefixes, params, "agent_b"
    )
    for c, p in zip(got, prefixes, strict=True):
        c.meta[PREFIX] = p
    with tiny_pair.use("agent_b"):
        update = latent_logprobs(tiny_pair.model, got, temperature=1.0, pad_id=0)
    for row, c in zip(update, got, strict=True):
        assert c.logprobs and torch.allclose(row[: len(c.logprobs)], torch.tensor(c.logprobs), atol=1e-4)
