"""The latent exchange: the challenger reads its paired draft's KV cache instead of its text.

Both adapters sit on one frozen base, so the drafter's keys and values have the shapes the
challenger's attention expects (KVComm and Cache-to-Cache share caches between models; here
it is one base under two adapters). The env stays a text env: a latent challenger's
observation carries a handle (:func:`agon_env.vocabulary.draft_handle`) and no draft text;
this module resolves it.

* **Record.** A :class:`LatentAgent` that drafts records each draft under its handle in a
  :class:`LatentStore` shared by the seats: the adapter and the draft's token ids (cheap; no
  cache is kept for drafts nobody challenges).
* **Prefix.** When a latent observation names the draft, :func:`compute_prefixes` encodes
  its span (:mod:`agon_env.agents.latent_spans`) under the *drafter's* adapter (no gradient)
  as a :class:`LatentPrefix`: the default ``summary`` span in a forward pass of its own (the
  cache carries the summary and nothing else), an in-context span within the draft's prompt
  + completion (the cache carries what came before it too).
* **Place.** The prefix goes before the challenger's prompt. Its keys keep the rotary
  positions they were computed at (``start … end − 1``: ``0 … n − 1`` for a span encoded on
  its own, its place in the draft's sequence for one in context) and the challenger's tokens
  continue at ``end``, so every query–key distance is the one of a sequence in which the span
  directly precedes the challenger's prompt; no key is re-rotated, which works for any
  position scheme. With :attr:`LatentConfig.layers` set,
  only those layers attend to the prefix (:func:`prefix_layers`).
* **Train.** The prefix travels with the challenger's completion (``meta["latent_prefix"]``,
  detached): the update's log-probs use the very same tensors
  (:func:`agon_env.algorithms.latent_logprobs.latent_logprobs`), so the gradient reaches only
  the challenger's adapter and sampler and trainer agree to round-off.

Memory: a prefix holds ``2 × layers × kv_heads × head_dim`` numbers per token (SmolLM2-135M:
2 × 30 × 3 × 64 × 4 bytes = 46 080 bytes in fp32), at most :attr:`LatentConfig.max_tokens`
per challenger turn, and lives as long as the step's rollout batch. HF backend only: vLLM
cannot take an injected cache (:data:`VLLM_REFUSAL`).
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from transformers import DynamicCache

from agon_env.agents.engine import num_layers as _num_layers
from agon_env.agents.hf_backend import Generators, HFBackend
from agon_env.agents.kv_cache import BufferCache
from agon_env.agents.latent_spans import span_of, span_tokens
from agon_env.agents.protocol import Completion, SamplingParams
from agon_env.options import LatentConfig
from agon_env.vocabulary import LATENT_TOKENS, VLLM_REFUSAL, draft_handle, is_handle

PREFIX = "latent_prefix"
"""The key of a latent challenger completion's :class:`LatentPrefix` in ``Completion.meta``."""


@dataclass(frozen=True)
class DraftRecord:
    """What it takes to recompute a draft's cache: its adapter and its token ids."""

    adapter: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]


@dataclass(frozen=True)
class LatentPrefix:
    """The keys and values of a draft's span, per layer ``[kv_heads, tokens, head_dim]``, detached."""

    keys: tuple[Tensor, ...]
    values: tuple[Tensor, ...]
    start: int
    """Rotary position of the span's first token: 0 for a span encoded on its own, its place in
    the draft's sequence for one encoded in context."""
    layers: tuple[int, ...] = ()
    """Layers that attend to it (empty: all)."""

    @property
    def length(self) -> int:
        return int(self.keys[0].shape[1]) if self.keys else 0

    @property
    def end(self) -> int:
        """Where the challenger's tokens continue (0 without a prefix: a plain prompt)."""
        return self.start + self.length if self.length else 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class LatentStore:
    """Draft records by handle, the last ``capacity`` kept (only token ids: small)."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.capacity = capacity
        self._records: OrderedDict[str, DraftRecord] = OrderedDict()

    def put(self, handle: str, record: DraftRecord) -> None:
        self._records[handle] = record
        self._records.move_to_end(handle)
        while len(self._records) > self.capacity:
            self._records.popitem(last=False)

    def get(self, handle: str) -> DraftRecord:
        if handle not in self._records:
            raise KeyError(
                f"no draft recorded under {handle!r}: the drafting seat must be a LatentAgent sharing "
                "this LatentStore (agon_env.agents.latent.latent_agents)"
            )
        return self._records[handle]


@torch.no_grad()
def compute_prefixes(base: Any, records: Sequence[DraftRecord], config: LatentConfig) -> list[LatentPrefix]:
    """Each draft's span cache under its own adapter (no gradient: nothing flows back to it).

    A span encoded on its own (:attr:`~agon_env.agents.latent_spans.Span.own_pass`, the default
    ``summary``) is a forward pass over its tokens alone at positions ``0 … n − 1``, so the
    challenger continues at ``n``; one encoded in context runs the draft's prompt and completion
    up to the span's end and keeps the span's rows, at the positions they had there.
    """
    own = span_of(config.span).own_pass
    layers = tuple(config.layers)
    # Per draft: the tokens to run and the [lo, hi) rows of the result that are the span.
    plans: list[tuple[list[int], int, int]] = []
    for r in records:
        s, e = span_tokens(base.tokenizer, r.completion_ids, config.span, config.max_tokens)
        if own:
            plans.append((list(r.completion_ids[s:e]), 0, e - s))
        else:
            n = len(r.prompt_ids)
            plans.append((list(r.prompt_ids) + list(r.completion_ids[:e]), n + s, n + e))
    out = [LatentPrefix((), (), lo, layers) for _, lo, _ in plans]  # empty spans: no cache
    by_adapter: dict[str, list[int]] = {}
    for i, (r, (_, lo, hi)) in enumerate(zip(records, plans, strict=True)):
        if hi > lo:
            by_adapter.setdefault(r.adapter, []).append(i)
    model, pad = base.model, base.tokenizer.pad_token_id or 0
    was_training = model.training
    model.eval()
    try:
        for adapter, rows in by_adapter.items():
            seqs = [plans[i][0] for i in rows]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for j, s in enumerate(seqs):  # right padding: the real tokens keep positions 0..len-1
                ids[j, : len(s)], mask[j, : len(s)] = torch.tensor(s), 1
            cache = DynamicCache()
            with base.use(adapter):
                model(
                    input_ids=ids.to(base.device),
                    attention_mask=mask.to(base.device),
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
            for j, i in enumerate(rows):
                _, lo, hi = plans[i]
                keys = tuple(layer.keys[j, :, lo:hi].clone() for layer in cache.layers)
                values = tuple(layer.values[j, :, lo:hi].clone() for layer in cache.layers)
                out[i] = LatentPrefix(keys, values, lo, layers)
    finally:
        model.train(was_training)
    return out


def stack_prefixes(
    prefixes: Sequence[LatentPrefix], device: Any
) -> tuple[list[Tensor], list[Tensor], Tensor, Tensor]:
    """Per-layer ``[B, kv_heads, P, head_dim]`` keys and values, left-padded to the longest
    prefix ``P``, its ``[B, P]`` mask and each row's ``end`` (where its own tokens start)."""
    width = max((p.length for p in prefixes), default=0)
    ends = torch.tensor([p.end for p in prefixes], dtype=torch.long, device=device)
    mask = torch.zeros((len(prefixes), width), dtype=torch.long, device=device)
    if width == 0:
        return [], [], mask, ends
    like = next(p for p in prefixes if p.length)
    keys, values = [], []
    for layer in range(len(like.keys)):
        k0, v0 = like.keys[layer], like.values[layer]
        k = k0.new_zeros((len(prefixes), k0.shape[0], width, k0.shape[2]), device=device)
        v = v0.new_zeros((len(prefixes), v0.shape[0], width, v0.shape[2]), device=device)
        for r, p in enumerate(prefixes):
            if p.length:
                k[r, :, width - p.length :], v[r, :, width - p.length :] = p.keys[layer], p.values[layer]
        keys.append(k)
        values.append(v)
    for r, p in enumerate(prefixes):
        mask[r, width - p.length :] = 1 if p.length else 0
    return keys, values, mask, ends


# -- a layer subset: the other layers drop the prefix's columns ------------------------------

NAME = "agon_latent"
_STATE: contextvars.ContextVar[tuple[int, frozenset[int], str] | None] = contextvars.ContextVar(
    "agon_latent", default=None
)


def _attention(module: Any, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, **kw: Any) -> Any:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    state = _STATE.get()
    if state is None:
        raise RuntimeError("agon_latent attention outside prefix_layers()")
    width, layers, inner = state
    if getattr(module, "layer_idx", None) not in layers:
        key, value = key[:, :, width:], value[:, :, width:]
        mask = None if mask is None else mask[..., width:]
    return ALL_ATTENTION_FUNCTIONS[inner](module, query, key, value, mask, **kw)


@contextmanager
def prefix_layers(model: Any, width: int, layers: Sequence[int]) -> Iterator[None]:
    """Within the block only ``layers`` attend to the first ``width`` cache columns (the
    prefix); the others see the challenger's own tokens only. Nothing to do for all layers."""
    if not layers or width == 0:
        yield
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    inner = model.config._attn_implementation
    if inner not in ("sdpa", "agon_sdpa"):
        raise ValueError(f"latent.layers needs sdpa attention, the model uses {inner!r}")
    AttentionInterface.register(NAME, _attention)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS[inner])
    token = _STATE.set((width, frozenset(layers), inner))
    model.set_attn_implementation(NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(inner)
        _STATE.reset(token)


# -- sampling ---------------------------------------------------------------------------------


def generate_with_prefixes(
    backend: HFBackend,
    prompts: Sequence[str],
    prefixes: Sequence[LatentPrefix],
    params: SamplingParams,
    adapter: str,
    seeds: Sequence[int] | None = None,
) -> list[Completion]:
    """:meth:`HFBackend.generate` with row ``i`` conditioned on ``prefixes[i]`` (same seeds, same
    chunking, same log-prob convention)."""
    ids = [backend._encode(p) for p in prompts]
    seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, (1,)).item())
    device = backend.base.device
    gen = torch.Generator(device=device).manual_seed(seed)
    sized = [[0] * (len(x) + p.length) for x, p in zip(ids, prefixes, strict=True)]  # chunk on both
    out: list[Completion | None] = [None] * len(ids)
    for chunk in backend._chunks(sized, params):
        g: Generators = (
            gen
            if seeds is None
            else [torch.Generator(device=device).manual_seed(int(seeds[i])) for i in chunk]
        )
        rows = _run(backend, [ids[i] for i in chunk], [prefixes[i] for i in chunk], adapter, params, g)
        for i, c in zip(chunk, rows, strict=True):
            c.meta["adapter"] = adapter
            out[i] = c
    return [c for c in out if c is not None]


@torch.inference_mode()
def _run(
    backend: HFBackend,
    ids: list[list[int]],
    prefixes: list[LatentPrefix],
    adapter: str,
    params: SamplingParams,
    gen: Generators,
) -> list[Completion]:
    device, n = backend.base.device, len(ids)
    keys, values, pmask, ends = stack_prefixes(prefixes, device)
    width = max(len(x) for x in ids)
    input_ids = torch.full((n, width), backend.pad_id, dtype=torch.long)
    tail = torch.zeros((n, width), dtype=torch.long)
    for r, x in enumerate(ids):
        input_ids[r, width - len(x) :], tail[r, width - len(x) :] = torch.tensor(x), 1
    tail, input_ids = tail.to(device), input_ids.to(device)
    positions = ends[:, None] + (tail.cumsum(-1) - 1).clamp(min=0)
    cache = BufferCache(_num_layers(backend.base.base_model), pmask.shape[1] + width + params.max_new_tokens)
    for layer, k, v in zip(cache.layers, keys, values, strict=False):
        layer.update(k, v)
    ctx, live = backend._adapter_context([adapter] * n)
    model = backend.base.model
    was_training = model.training
    model.eval()
    try:
        with ctx, prefix_layers(model, pmask.shape[1], prefixes[0].layers):
            mask = torch.cat([pmask, tail], dim=-1)
            return backend._decode(ids, input_ids, mask, positions, live, params, gen, cache)
    finally:
        model.train(was_training)


# -- the agent --------------------------------------------------------------------------------


class LatentAgent:
    """An :class:`~agon_env.agents.protocol.Agent` around an LLM agent: it records its drafts and
    answers latent observations conditioned on the named draft's cache.

    ``drafting`` (default: ``agent``) is what drafts and reads text: ``agon eval`` passes its
    sample-cached agent, so a latent cascade's drafts are the standalone ones. ``keep_prefix``
    leaves the prefix on the completion for the update (training); evaluation drops it.
    """

    def __init__(
        self,
        agent: Any,
        store: LatentStore,
        config: LatentConfig | None = None,
        drafting: Any = None,
        keep_prefix: bool = True,
    ) -> None:
        if not isinstance(agent.backend, HFBackend):
            raise ValueError(VLLM_REFUSAL)
        self.agent, self.store, self.config = agent, store, config or LatentConfig()
        self.drafting = drafting or agent
        self.keep_prefix = keep_prefix
        self.name = agent.name

    def act(
        self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        out: list[Completion | None] = [None] * len(observations)
        latent = [i for i, o in enumerate(observations) if is_handle(o.get("draft"))]
        for group, play in (
            (latent, self._challenge),
            ([i for i in range(len(out)) if i not in latent], self._text),
        ):
            if group:
                got = play(
                    [observations[i] for i in group], None if seeds is None else [seeds[i] for i in group]
                )
                for i, c in zip(group, got, strict=True):
                    out[i] = c
        return [c for c in out if c is not None]

    def _text(self, observations: list[Mapping[str, Any]], seeds: list[int] | None) -> list[Completion]:
        completions = list(self.drafting.act(observations, seeds=seeds))
        for o, c in zip(observations, completions, strict=True):
            if int(o.get("role", 0)) == 0 and c.completion_ids:
                prompt = c.prompt_ids or self.agent.backend._encode(self.agent.render(o))
                adapter = c.meta.get("adapter") or self.agent.adapter
                record = DraftRecord(adapter, tuple(prompt), tuple(c.completion_ids))
                self.store.put(draft_handle(str(o.get("problem", "")), c.text), record)
        return completions

    def _challenge(self, observations: list[Mapping[str, Any]], seeds: list[int] | None) -> list[Completion]:
        records = [self.store.get(str(o["draft"])) for o in observations]
        prefixes = compute_prefixes(self.agent.base, records, self.config)
        prompts = [self.agent.render(o) for o in observations]
        completions = generate_with_prefixes(
            self.agent.backend, prompts, prefixes, self.agent.sampling, self.agent.adapter, seeds
        )
        for o, c, p in zip(observations, completions, prefixes, strict=True):
            c.agent = self.name
            c.meta.setdefault("role", int(o.get("role", 1)))
            c.meta.update({LATENT_TOKENS: p.length, "latent_bytes": p.nbytes})
            if self.keep_prefix:
                c.meta[PREFIX] = p
        return completions

    def __getattr__(self, name: str) -> Any:
        # Everything else (sampling, prompts, adapter, render) is the wrapped LLM agent's: the
        # held-out check and agon eval read those of any agent they are handed.
        if name.startswith("__") or "agent" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["agent"], name)

    def __repr__(self) -> str:
        return f"LatentAgent({self.agent!r}, span={self.config.span!r})"


def latent_agents(
    agents: Mapping[str, Any], config: LatentConfig | None = None, keep_prefix: bool = True
) -> dict[str, LatentAgent]:
    """Every seat's agent as a :class:`LatentAgent`, all sharing one :class:`LatentStore`."""
    store = LatentStore()
    return {seat: LatentAgent(a, store, config, keep_prefix=keep_prefix) for seat, a in agents.items()}
