"""A KV cache over preallocated per-layer buffers, for the HF sampling loop.

transformers' ``DynamicCache`` grows each layer with ``torch.cat`` on every decode step,
which copies the whole cache every step (~12% of a step on SmolLM2-135M, 2 CPU cores).
``BufferCache`` keeps ``DynamicCache`` semantics (so any HF causal LM accepts it) but
writes each step into a buffer sized for prompt + ``max_new_tokens`` and hands out
growing views; it can drop finished rows, and give every row a prefix they all share --
either as copies (:meth:`BufferCache.batch_repeat_interleave`) or stored once
(:meth:`BufferCache.share_prefix`, which :func:`agon_env.agents.attention.prefix_attention`
reads: a decode step then reads the prefix's keys and values once, not once per row); and two
caches can be joined into one (:func:`concat_caches`: rows that join a running batch), each
prefix still kept once, the arrivals written into rows that finished rows left free
(:meth:`_BufferLayer.compact`, :meth:`_BufferLayer.take`) where there are enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer


class _BufferLayer(DynamicLayer):
    """A KV layer that writes into a preallocated buffer and returns growing views of it."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0
        self.prefix: tuple[torch.Tensor, torch.Tensor] | None = None
        """Keys and values ``[1, heads, P, dim]`` every row attends to, stored once
        (:meth:`share_prefix`); ``keys``/``values`` then hold each row's own tokens only."""
        self._kr: torch.Tensor | None = None
        self._vr: torch.Tensor | None = None
        """The buffers whose first rows ``_k``/``_v`` are: rows beyond them are free for rows that
        join (:meth:`take`), left by rows that finished (:meth:`compact`) or allocated spare
        (:meth:`fill`)."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        b, h, n, d = key_states.shape
        cap = max(self.capacity, n)
        self._k = self._kr = key_states.new_empty(b, h, cap, d)
        self._v = self._vr = value_states.new_empty(b, value_states.shape[1], cap, value_states.shape[3])
        self.is_initialized = True

    def _grow(self, needed: int) -> None:
        cap = max(needed, 2 * self._k.shape[-2])
        k = self._k.new_empty(*self._k.shape[:2], cap, self._k.shape[-1])
        v = self._v.new_empty(*self._v.shape[:2], cap, self._v.shape[-1])
        k[:, :, : self.length] = self._k[:, :, : self.length]
        v[:, :, : self.length] = self._v[:, :, : self.length]
        self._k, self._v = self._kr, self._vr = k, v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self._k.shape[-2]:
            self._grow(end)
        self._k[:, :, self.length : end] = key_states
        self._v[:, :, self.length : end] = value_states
        self.length = end
        self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        # What the attention mask and positions count: a shared prefix is part of every row.
        return self.length + (0 if self.prefix is None else self.prefix[0].shape[-2])

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._k, self._v = self._kr, self._vr = self._k[indices], self._v[indices]
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

    def compact(self, keep: Sequence[int]) -> None:
        """Keep rows ``keep`` (ascending), moved down in place: what :meth:`batch_select_indices`
        does without a copy of the whole cache (only the rows after a gap move, their cached
        tokens only); the rows left behind are free for rows that join (:meth:`take`)."""
        if not self.is_initialized:
            return
        assert self._kr is not None and self._vr is not None
        for dst, src in enumerate(keep):
            if dst != src:
                self._kr[dst, :, : self.length] = self._kr[src, :, : self.length]
                self._vr[dst, :, : self.length] = self._vr[src, :, : self.length]
        self._k, self._v = self._kr[: len(keep)], self._vr[: len(keep)]
        self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

    def can_take(self, part: tuple[torch.Tensor, torch.Tensor]) -> bool:
        """Whether :meth:`take` fits ``part``: enough free rows, and its tokens no more than ours."""
        k = part[0]
        free = 0 if self._kr is None or not self.is_initialized else self._kr.shape[0] - self._k.shape[0]
        return free >= k.shape[0] and k.shape[-2] <= self.length

    def take(self, part: tuple[torch.Tensor, torch.Tensor]) -> bool:
        """Add ``part``'s rows (keys and values of their own tokens) after this layer's in its free
        rows, right-aligned at its tokens with zeros to their left, as :meth:`fill` would lay them
        out; False (nothing done) unless :meth:`can_take`. More tokens than the buffer holds later
        grow it (:meth:`update`)."""
        if not self.can_take(part):
            return False
        assert self._kr is not None and self._vr is not None
        k, v = part
        n, m, pad = self._k.shape[0], k.shape[0], self.length - k.shape[-2]
        for buf, x in ((self._kr, k), (self._vr, v)):
            buf[n : n + m, :, :pad] = 0
            buf[n : n + m, :, pad : self.length] = x
        self._k, self._v = self._kr[: n + m], self._vr[: n + m]
        self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]
        return True

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._k = self._kr = self._k.repeat_interleave(repeats, dim=0)
            self._v = self._vr = self._v.repeat_interleave(repeats, dim=0)
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

    def share_prefix(self, rows: int) -> None:
        """Keep the one row cached so far as the prefix of ``rows`` rows, stored once; what
        follows is cached per row in a buffer of the remaining capacity."""
        if not self.is_initialized:
            return
        if self._k.shape[0] != 1 or self.prefix is not None:
            raise ValueError("share_prefix needs one cached row and no shared prefix yet")
        p = self.length
        self.prefix = (self._k[:, :, :p], self._v[:, :, :p])
        cap = max(self.capacity - p, 1)
        self._k = self._kr = self._k.new_empty(rows, self._k.shape[1], cap, self._k.shape[-1])
        self._v = self._vr = self._v.new_empty(rows, self._v.shape[1], cap, self._v.shape[-1])
        self.length = 0
        self.keys, self.values = self._k[:, :, :0], self._v[:, :, :0]

    def trim(self, prefix_keep: Sequence[tuple[int, int]] | None, own_from: int) -> None:
        """Keep only the prefix columns in ``prefix_keep`` (None: all) and the own tokens from
        ``own_from`` on: columns no row reads any more (a prefix whose rows all left, padding left
        of every remaining row's tokens) stop being read at every step. Own tokens are dropped as a
        view (no copy); a prefix is copied only when part of it goes."""
        if self.prefix is not None and prefix_keep is not None:
            k, v = (_columns(t, prefix_keep) for t in self.prefix)
            self.prefix = (k, v) if k.shape[-2] else None
        if own_from and self.is_initialized:
            assert self._kr is not None and self._vr is not None
            self._k, self._v = self._k[:, :, own_from:], self._v[:, :, own_from:]
            self._kr, self._vr = self._kr[:, :, own_from:], self._vr[:, :, own_from:]
            self.length -= own_from
            self.capacity = self._k.shape[-2]
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

    def own(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's own cached keys and values ``[rows, heads, tokens, dim]`` (a prefix kept once
        left out)."""
        return self._k[:, :, : self.length], self._v[:, :, : self.length]

    def fill(self, parts: Sequence[tuple[torch.Tensor, torch.Tensor]], room: int, spare: int = 0) -> None:
        """Hold ``parts`` (each rows' keys and values) stacked, right-aligned at the longest, with
        zeros (masked by the caller) to their left and ``room`` free slots after; ``spare`` rows
        more are allocated, free for rows that join later (:meth:`take`)."""
        width = max(k.shape[-2] for k, _ in parts)
        k0, v0 = parts[0]
        rows = sum(k.shape[0] for k, _ in parts)
        # Only the padding is zeroed (masked, but it must be finite: a NaN times a zero weight is
        # NaN); the free slots are written before any read. Zeroing the whole buffer was half of
        # a join's cost.
        self._kr = k0.new_empty(rows + spare, k0.shape[1], width + room, k0.shape[-1])
        self._vr = v0.new_empty(rows + spare, v0.shape[1], width + room, v0.shape[-1])
        self._k, self._v = self._kr[:rows], self._vr[:rows]
        r = 0
        for k, v in parts:
            pad = width - k.shape[-2]
            self._k[r : r + k.shape[0], :, :pad] = 0
            self._v[r : r + v.shape[0], :, :pad] = 0
            self._k[r : r + k.shape[0], :, pad:width] = k
            self._v[r : r + v.shape[0], :, pad:width] = v
            r += k.shape[0]
        self.dtype, self.device, self.is_initialized = k0.dtype, k0.device, True
        self.length, self.prefix, self.capacity = width, None, width + room
        self.keys, self.values = self._k[:, :, :width], self._v[:, :, :width]

    def reset(self) -> None:
        self.length = 0
        self.prefix = None
        self._kr = self._vr = None
        super().reset()

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("the sampling cache is never cropped")


class BufferCache(DynamicCache):
    """``DynamicCache`` semantics over preallocated per-layer buffers (no per-step concat)."""

    def __init__(self, num_layers: int, capacity: int) -> None:
        Cache.__init__(self, layers=[_BufferLayer(capacity) for _ in range(num_layers)])

    def share_prefix(self, rows: int) -> None:
        """What :meth:`batch_repeat_interleave` does for a one-row prefix, without the copies:
        every layer keeps it once for ``rows`` rows. Only an attention that reads
        :attr:`_BufferLayer.prefix` (``agon_sdpa`` given ``shared_prefix=`` this cache) may
        then run on it: any other would see the rows' own tokens alone."""
        for layer in self.layers:
            layer.share_prefix(rows)

    def compact(self, keep: Sequence[int]) -> None:
        """:meth:`_BufferLayer.compact` on every layer: rows ``keep`` stay, in place."""
        for layer in self.layers:
            layer.compact(keep)

    def trim(self, prefix_keep: Sequence[tuple[int, int]] | None, own_from: int) -> None:
        """:meth:`_BufferLayer.trim` on every layer."""
        for layer in self.layers:
            layer.trim(prefix_keep, own_from)

    def shared_prefix(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Layer ``layer_idx``'s shared prefix keys and values, or None."""
        return self.layers[layer_idx].prefix


def concat_caches(
    a: BufferCache, b: BufferCache, room: int, keep: Sequence[tuple[int, int]] | None = None
) -> BufferCache:
    """``a``'s rows then ``b``'s in one cache, their own tokens right-aligned at the longer (the
    caller pads the attention mask to the left to match) and ``room`` free slots after. A prefix
    both keep once, the same tensors, stays kept once. Otherwise both are kept once side by side,
    ``a``'s columns then ``b``'s (a *bank*: the attention mask gives each row its own columns,
    the caller's to build); ``keep``: the column ranges of ``a``'s prefix to keep (default: all),
    so prefixes no row reads any more are dropped. The running batch of
    :mod:`agon_env.agents.engine` takes new rows this way, whatever prompts they start with.

    Where ``a``'s buffers have free rows enough and ``b``'s tokens are no longer than ``a``'s, ``b``'s
    rows go into them and ``a`` itself is returned (:meth:`_BufferLayer.take`): only the arrivals
    are copied. Otherwise a new cache is filled, with spare rows (half as many again) for the next
    arrivals, so a stream of arrivals copies the running rows a few times, not at every join."""
    fits = all(la.can_take(lb.own()) for la, lb in zip(a.layers, b.layers, strict=True))
    out = a if fits else BufferCache(len(a.layers), 0)
    same = all(
        la.prefix is not None and la.prefix is lb.prefix for la, lb in zip(a.layers, b.layers, strict=True)
    )
    for layer, la, lb in zip(out.layers, a.layers, b.layers, strict=True):
        prefix = la.prefix
        if not same:
            kept = None if la.prefix is None else tuple(_columns(t, keep) for t in la.prefix)
            if kept is not None and kept[0].shape[-2] == 0:
                kept = None
            if kept is None or lb.prefix is None:
                prefix = kept if lb.prefix is None else lb.prefix
            else:
                prefix = (torch.cat([kept[0], lb.prefix[0]], -2), torch.cat([kept[1], lb.prefix[1]], -2))
        if fits:
            layer.take(lb.own())  # fits: it takes them
        else:
            rows = la.own()[0].shape[0] + lb.own()[0].shape[0]
            layer.fill([la.own(), lb.own()], room, spare=rows // 2)
        layer.prefix = prefix
    return out


def _columns(t: torch.Tensor, keep: Sequence[tuple[int, int]] | None) -> torch.Tensor:
    if keep is None:
        return t
    return torch.cat([t[:, :, s:e] for s, e in keep], dim=-2) if keep else t[:, :, :0]


def shared_prefix_len(seqs: Sequence[Sequence[int]], minimum: int) -> int:
    """Tokens every sequence starts with, leaving each at least its last token; 0 below ``minimum``.

    The last prompt token must stay in each row's own pass: its logits predict the row's
    first completion token. Used by sampling (prefill once) and by the update forward.
    """
    if len(seqs) < 2:
        return 0
    first, limit = seqs[0], min(len(x) for x in seqs) - 1
    n = 0
    while n < limit and all(x[n] == first[n] for x in seqs):
        n += 1
    return n if n >= minimum else 0
