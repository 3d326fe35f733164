"""Batched sampling with transformers on the shared base, with a named adapter active.

A custom decode loop rather than ``model.generate`` because (measured on SmolLM2-135M,
2 CPU cores, where a decode step is bound by reading weights and KV cache):

* rows that hit EOS or a stop string leave the batch at once, instead of being
  padded along until the longest row ends;
* the KV cache is written into preallocated buffers instead of ``torch.cat``-grown
  each step (the concatenation copied the whole cache every step: ~12% of a step);
* the prompt prefix all rows share (the few-shot turns; a GRPO group's whole prompt)
  is prefilled once -- prefill of ~150-token few-shot prompts is a large part of a rollout
  on CPU -- and, on CPU, kept once for all rows, which attend to it together
  (:func:`agon_env.agents.attention.prefix_attention`; elsewhere its keys/values are copied
  to every row);
* the per-token log-prob of each sampled token is read off the same logits.

Conventions (what the trainer can rely on):

* ``completion_ids`` run up to and including the token that completed the stop string,
  or the EOS token (kept, so a policy can learn to stop); nothing after.
  ``text`` is ``completion_text(completion_ids)`` (decoded without special tokens), so text and ids always
  agree (a token that completes a stop string may carry a few characters past it).
* ``logprobs[i]`` is the sampled token's log-prob under the distribution it was drawn
  from: ``log_softmax(logits / T)``, renormalised over the kept tokens when top-k/top-p
  truncate (as vLLM's ``processed_logprobs``), so both backends report the same numbers.
  With ``top_p == 1, top_k == 0`` -- what training requires -- a trainer recomputing
  log-probs with a forward at the same temperature gets the same numbers. With
  ``temperature == 0`` (greedy) it is plain ``log_softmax(logits)``.
* The same prompts, params and ``seed`` give the same completions (one
  ``torch.Generator`` walks the sub-batches in order). With per-prompt ``seeds`` each
  row samples from its own generator instead, so a row's completion does not depend on
  which other rows share its batch (data-parallel ranks rely on this), up to the float
  rounding of batched matmuls.
* ``stream`` (:mod:`agon_env.agents.streaming`) hears each row's text as the loop samples it,
  a token at a time; the pieces join to the row's ``text``.

The loop itself is :mod:`agon_env.agents.engine`: :meth:`HFBackend.generate` hands it its rows
(chunk by chunk) and waits, so calls made from several threads at once (a server's requests, the
cascade's stages of different requests) share its decode steps; this module keeps the sampling
rules the engine applies (``_sample``, stop strings, EOS, when a prefix is shared).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch

from agon_env.agents import logit_rules
from agon_env.agents.engine import MIN_SHARED_PREFIX, Request, engine_for
from agon_env.agents.kv_cache import BufferCache, shared_prefix_len
from agon_env.agents.protocol import Completion, SamplingParams, completion_text, stop_end
from agon_env.agents.streaming import Emit, TextDeltas
from agon_env.vocabulary import REFERENCE

__all__ = ["BufferCache", "HFBackend", "SamplingParams"]


Generators = torch.Generator | list[torch.Generator]
"""One generator for the whole batch, or one per row (per-prompt seeds)."""


def _multinomial(probs: torch.Tensor, gen: Generators) -> torch.Tensor:
    """One draw per row: ``[R, V]`` -> ``[R, 1]``, from a shared or a per-row generator."""
    if isinstance(gen, torch.Generator):
        return torch.multinomial(probs, 1, generator=gen)
    # One uniform per row from that row's generator, then inverse-CDF sampling of the whole
    # batch at once: a vocabulary-sized multinomial call per row cost ~7% of a decode step.
    u = torch.cat([torch.rand(1, generator=g, device=probs.device) for g in gen])
    cdf = probs.cumsum(-1)
    idx = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
    # u * total can round up to total: never step past the last token with mass.
    last = (probs > 0).cumsum(-1).argmax(-1, keepdim=True)
    return torch.minimum(idx, last)


class HFBackend:
    """Samples completions from ``base`` (a :class:`~agon_env.agents.adapters.SharedBase`)."""

    def __init__(
        self, base: Any, *, merge: bool = True, prefix_attention: bool = True, keep_merged: int = 0
    ) -> None:
        """``merge``: sample single-adapter chunks with the adapter merged into a copy of the
        base weights (:mod:`agon_env.agents.merge`; same tokens, ~2× faster decode on CPU).
        ``prefix_attention``: keep a shared prompt prefix's keys/values once, not once per row,
        where the model runs ``agon_sdpa`` on CPU (same tokens up to float round-off).
        ``keep_merged``: how many adapters' merged weights stay in memory between calls
        (:class:`~agon_env.agents.merge.MergeStore`: not merged again while they are unchanged,
        one copy of the wrapped weights held each); 0, training's: freed after every call."""
        self.base = base
        self.merge = merge
        self.prefix_attention = prefix_attention
        self.keep_merged = keep_merged
        self.tokenizer = base.tokenizer
        gen_eos = getattr(base.base_model.generation_config, "eos_token_id", None)
        eos = {self.tokenizer.eos_token_id}
        eos.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        self.eos_ids = sorted(int(e) for e in eos if e is not None)
        self.pad_id = (
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]
        )

    # -- public ----------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        adapter: str | Sequence[str] | None = None,
        seeds: Sequence[int] | None = None,
        stream: Emit | None = None,
    ) -> list[Completion]:
        """One completion per prompt (text prompts are tokenised without extra specials).

        ``adapter`` is one adapter name for all prompts, a name per prompt (rows of
        different adapters share each decode forward: the engine's Adapters), or
        ``None`` to use whatever adapter is active now. ``REFERENCE`` is the base.
        ``seeds`` (one per prompt) gives every row its own sampling generator.
        ``stream``: called with ``(prompt index, text)`` as each row's tokens are sampled.
        """
        params = params or SamplingParams()
        if len(prompts) == 0:
            return []
        ids = [self._encode(p) for p in prompts]
        names = [adapter] * len(ids) if adapter is None or isinstance(adapter, str) else list(adapter)
        if len(names) != len(ids):
            raise ValueError(f"got {len(names)} adapter names for {len(ids)} prompts")
        if seeds is not None and len(seeds) != len(ids):
            raise ValueError(f"got {len(seeds)} seeds for {len(ids)} prompts")
        seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, (1,)).item())
        gen = torch.Generator(device=self.base.device).manual_seed(seed)
        deltas = None if stream is None else TextDeltas(self.tokenizer, stream)
        rows = [
            Request(
                ids[i],
                params,
                names[i] if names[i] is not None else self.base.active,
                None
                if params.temperature == 0
                else gen
                if seeds is None
                else torch.Generator(device=self.base.device).manual_seed(int(seeds[i])),
                own_generator=seeds is not None,
                on_token=None if deltas is None else _row(deltas, i),
            )
            for i in range(len(ids))
        ]
        # Each chunk is admitted when it fits: a caller alone gets the chunks of the static loop.
        engine_for(self).run([[rows[i] for i in chunk] for chunk in self._chunks(ids, params)])
        out = []
        for i, r in enumerate(rows):
            c = Completion(
                text=completion_text(self.tokenizer, r.out_ids),
                prompt_ids=list(r.ids),
                completion_ids=r.out_ids,
                logprobs=r.out_lp,
                top_logprobs=r.out_top,
                finish_reason=r.finish,
                temperature=params.temperature,
            )
            c.meta["adapter"] = r.adapter
            if deltas is not None:
                deltas.finish(i, c.text)
            out.append(c)
        return out

    # -- internals -------------------------------------------------------------------

    def _encode(self, prompt: str | Sequence[int]) -> list[int]:
        if isinstance(prompt, str):
            # Chat-rendered prompts already contain their special tokens.
            ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        else:
            ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("cannot sample from an empty prompt")
        return ids

    def _chunks(self, ids: list[list[int]], params: SamplingParams) -> list[list[int]]:
        """Split prompt indices into batches that respect the size and token budgets.

        Sorting by length first keeps padding low; the order is deterministic.
        """
        order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i))
        chunks: list[list[int]] = []
        current: list[int] = []
        for i in order:
            rows = len(current) + 1
            longest = len(ids[i])  # ascending order: the newcomer is the longest so far
            over_tokens = (
                params.max_batch_tokens is not None
                and rows * (longest + params.max_new_tokens) > params.max_batch_tokens
            )
            if current and (rows > params.max_batch_size or over_tokens):
                chunks.append(current)
                current = []
            current.append(i)
        if current:
            chunks.append(current)
        return chunks

    def _adapter_context(self, names: list[str | None]) -> Any:
        """One adapter for the chunk: sampled merged into the base (``merge``); mixed chunks
        route rows per LoRA layer."""
        unique = set(names)
        if len(unique) == 1:
            name = names[0] if names[0] is not None else self.base.active
            if name == REFERENCE or not self.merge:
                return self.base.use(name), None
            return self.base.sampling(name), None
        # peft's mixed-batch forward: each row goes through its own adapter in every LoRA
        # layer while the base matmul stays shared across the whole batch.
        return nullcontext(), [n if n is not None else self.base.active for n in names]

    def _sample(
        self, logits: torch.Tensor, params: SamplingParams, gen: Generators
    ) -> tuple[torch.Tensor, torch.Tensor, logit_rules.Alternatives | None]:
        """Next tokens and their log-probs under the tempered distribution, renormalised over
        the tokens top-k / top-p keep (what vLLM's ``processed_logprobs`` reports), and with
        ``params.top_logprobs`` the most likely tokens of that distribution (else ``None``)."""
        logits = logits.float()
        if params.temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)
            tok = logp.argmax(dim=-1)
            top = logit_rules.top_alternatives(logp, params.top_logprobs)
            return tok, logp.gather(-1, tok[:, None]).squeeze(-1), top
        logp = torch.log_softmax(logits / params.temperature, dim=-1)
        probs = logp.exp()
        truncated = False
        if params.top_k > 0 and params.top_k < probs.shape[-1]:
            kth = probs.topk(params.top_k, dim=-1).values[:, -1:]
            probs, truncated = probs.masked_fill(probs < kth, 0.0), True
        if params.min_p > 0:
            probs, truncated = logit_rules.min_p_filter(probs, params.min_p), True
        if params.top_p < 1.0:
            sp, si = logit_rules.nucleus(probs, params.top_p)
            # A shared generator's multinomial draws one number per column: it runs over the
            # whole (sorted) row, so its stream is the same however few are kept. Per-row
            # generators draw one uniform per row, and the kept columns alone give the draw the
            # zeros past them would (the same running sums): no vocabulary-wide cumsums.
            shared = isinstance(gen, torch.Generator)
            drawn = torch.nn.functional.pad(sp, (0, probs.shape[-1] - sp.shape[-1])) if shared else sp
            tok = si.gather(-1, _multinomial(drawn, gen)).squeeze(-1)
            probs, truncated = torch.zeros_like(probs).scatter(-1, si, sp), True
        else:
            tok = _multinomial(probs, gen).squeeze(-1)
        if truncated:
            kept = probs.gather(-1, tok[:, None]).squeeze(-1)
            lp = torch.log(kept) - torch.log(probs.sum(-1))
            if params.top_logprobs:
                logp = torch.log(probs) - torch.log(probs.sum(-1, keepdim=True))
            return tok, lp, logit_rules.top_alternatives(logp, params.top_logprobs)
        top = logit_rules.top_alternatives(logp, params.top_logprobs)
        return tok, logp.gather(-1, tok[:, None]).squeeze(-1), top

    def _stop_hit(self, tokens: list[int], params: SamplingParams, window: int) -> bool:
        # Decoding only the tail is enough: a stop string that appears must end in the
        # newest token, else it would have been caught a step earlier.
        tail = self.tokenizer.decode(tokens[-window:], skip_special_tokens=False)
        if not any(s in tail for s in params.stop):
            return False
        # A marker (</think>) may be far back: the rare tail hit is checked on the whole text.
        return not params.stop_after or stop_end(self.tokenizer.decode(tokens), params) is not None

    def _shared_prefix(self, ids: list[list[int]], names: list[str | None]) -> int:
        """Length of the prompt prefix all rows share (0 when sharing does not pay).

        Rows must keep at least one own token (its logits start the completion), and all
        rows must use one adapter (the prefix's keys/values depend on the adapter).
        """
        if len(set(names)) != 1:
            return 0
        return shared_prefix_len(ids, MIN_SHARED_PREFIX)

    def _prefix_once(self) -> bool:
        """Whether a shared prefix is kept once: only ``agon_sdpa`` reads it (any other
        attention would miss it), and only its CPU path is measured to pay."""
        from agon_env.agents.attention import NAME

        impl = getattr(self.base.base_model.config, "_attn_implementation", None)
        return self.prefix_attention and impl == NAME and torch.device(self.base.device).type == "cpu"

    def _decode(
        self,
        ids: list[list[int]],
        input_ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        live_names: list[str] | None,
        params: SamplingParams,
        gen: Generators,
        cache: BufferCache,
        on_token: Callable[[int, int], None] | None = None,
    ) -> list[Completion]:
        device = input_ids.device
        n = len(ids)
        model = self.base.model
        # A cache keeping a shared prefix once is read through agon_sdpa's prefix_attention.
        shared = {} if cache.shared_prefix(0) is None else {"shared_prefix": cache}
        extra = {**shared, **({} if live_names is None else {"adapter_names": live_names})}
        ending = logit_rules.enders(self.eos_ids, params)
        eos = torch.tensor(ending, dtype=torch.long, device=device)
        window = max((len(s) for s in params.stop), default=0) + 2
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lp: list[list[float]] = [[] for _ in range(n)]
        out_top: list[list[list[tuple[int, float]]]] = [[] for _ in range(n)]
        finish = ["length"] * n
        alive = list(range(n))  # original row index of each live batch row
        out = model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            **extra,
        )
        last_pos = positions[:, -1:]
        for step in range(params.max_new_tokens):
            logits = out.logits[:, -1, :]
            if params.repetition_penalty != 1.0 or step < params.min_tokens:
                seen = [[*ids[r], *out_ids[r]] for r in alive]
                logits = logit_rules.shape(logits, params, seen, step, ending)
            tok, lp, top = self._sample(logits, params, gen)
            tok_l, lp_l = tok.tolist(), lp.tolist()
            is_eos = torch.isin(tok, eos).tolist()
            keep: list[int] = []
            for b, r in enumerate(alive):
                out_ids[r].append(tok_l[b])
                out_lp[r].append(lp_l[b])
                if top is not None:
                    out_top[r].append(logit_rules.alternatives_of(top, b))
                if on_token is not None:
                    on_token(r, tok_l[b])
                counts = step + 1 >= params.min_tokens  # stop strings are looked for from min_tokens on
                if is_eos[b] or (params.stop and counts and self._stop_hit(out_ids[r], params, window)):
                    finish[r] = "stop"
                else:
                    keep.append(b)
            if not keep or step == params.max_new_tokens - 1:
                break
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=-1)
            last_pos = last_pos + 1
            if len(keep) < len(alive):
                # Finished rows leave the batch: later steps only pay for live rows.
                idx = torch.tensor(keep, device=device)
                cache.batch_select_indices(idx)
                mask, last_pos, tok = mask[idx], last_pos[idx], tok[idx]
                alive = [alive[b] for b in keep]
                if isinstance(gen, list):
                    gen = [gen[b] for b in keep]
                if live_names is not None:
                    live_names = [live_names[b] for b in keep]
                    extra = {**shared, "adapter_names": live_names}
            out = model(
                input_ids=tok[:, None],
                attention_mask=mask,
                position_ids=last_pos,
                past_key_values=cache,
                use_cache=True,
                **extra,
            )

        return [
            Completion(
                text=completion_text(self.tokenizer, out_ids[r]),
                prompt_ids=list(ids[r]),
                completion_ids=out_ids[r],
                logprobs=out_lp[r],
                top_logprobs=out_top[r],
                finish_reason=finish[r],
                temperature=params.temperature,
            )
            for r in range(n)
        ]


def _row(deltas: TextDeltas, index: int) -> Callable[[int], None]:
    """A row's sampled token as ``(prompt index, [token])`` for ``deltas``."""
    return lambda token: deltas.add(index, [token])
