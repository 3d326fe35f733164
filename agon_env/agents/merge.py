"""Sampling with one adapter merged into the base weights, the base left bitwise intact.

With an adapter active, every LoRA-wrapped linear layer runs the base matmul plus two
rank-r matmuls, a scale and an add. At decode shapes on CPU (a few dozen rows) those small
ops cost about as much as the base matmul: the LoRA layers were half of a decode step in a
py-spy profile. When a generation chunk uses one adapter, :class:`MergedWeights` writes
``W + scale · B A`` for every wrapped layer into a buffer of its own, points the layer's
weight at the buffer, and runs the block with peft's adapters disabled: one matmul per
layer. On exit every weight points at its original tensor again, which was never written,
so any number of merge/restore cycles leave the base bitwise equal (tested) and the adapters
are untouched. The buffers (one copy of the wrapped weights, ~0.4 GB for SmolLM2-135M in
fp32) are allocated for each merged block and freed after it (``keep_buffers`` off), so the
update's activations reuse that memory instead of adding to it: training's peak is the larger
of the two, not their sum. Re-filling them is a write of the weights, small next to a decode.

**Layout.** On CPU a merged weight is stored input-major (``[in, out]`` contiguous) and the layer
sees its transpose, a view (:data:`INPUT_MAJOR`): ``F.linear`` then hands MKL a plain row-major
right operand instead of a transposed one, which it streams faster at decode shapes (a few rows
against weights read from memory: ``benchmarks/decode_levers_bench.py``, docs/benchmarks.md). MKL
may sum in another order for this operand, so the round-off can differ from the base layout's: the
bench saw the same tokens and log-probs within 3e-5 (``largest_logprob_difference``).

**The merge is one ``addmm`` per layer** (:func:`merged_weight`): the transposed base copied into
the buffer and the rank-r product added onto it in place, ``W + s · B A`` with no ``[out, in]``
temporaries (peft's ``get_delta_weight`` makes two, ``B A`` and its scaled copy, and then an add
reads them back through the transposed view). Merging SmolLM2-135M's adapter took 0.42 s this
way against 0.52 s into kept buffers, 0.39 against 0.62 s into new ones, with the same bits
(``benchmarks/merge_bench.py``, docs/benchmarks.md). An adapter whose weights are not in the
base's dtype, or a layer that stores its weight transposed (``fan_in_fan_out``), is merged peft's
way.

**Packed.** While a :class:`MergedSet` is open, each merged weight of at least
:data:`PACK_MIN_NUMEL` entries (the MLP's gate, up and down projections of SmolLM2) runs from a
copy reordered for oneDNN's linear, the way :mod:`~agon_env.agents.packed_head` runs the output
head: at 8 rows MKL's ``F.linear`` read those weights at ~5 GB/s, oneDNN's product at ~7.5 GB/s
(docs/benchmarks.md, "Packed merged weights", with its command). Such a weight is merged in the
base layout, from which the reorder is twice as fast as from the input-major one, and is packed
right after its merge; below :data:`~agon_env.agents.packed_head.MIN_ROWS` rows its layer runs
``F.linear`` on the merged weight, as before. Smaller weights (the attention projections) stay on
``F.linear``: packed, they gained little or lost (:data:`PACK_MIN_NUMEL`). The packed copies are
more memory on top of the merged weights (~0.3 GB per adapter for SmolLM2-135M), held where the
merged weights are (:class:`MergeStore`), and change the round-off like the packed head (log-probs
by up to 4.6e-5 in ``benchmarks/decode_levers_bench.py``).

Not merged, with a one-line warning, and sampled through peft as before: a base layer that
is not a plain floating-point ``nn.Linear`` (a quantised base, whose merge would not be
exact) or an adapter that is not plain LoRA (DoRA, or peft's ``lora_bias``).
"""

from __future__ import annotations

import collections
import contextlib
import warnings
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from agon_env.agents import packed_head

INPUT_MAJOR = True
"""Lay merged CPU weights out input-major (the module docstring's Layout); off, the base layout."""

PACKED_LINEARS = True
"""Run a :class:`MergedSet`'s large merged weights packed for oneDNN (the module docstring's
Packed); off: ``F.linear`` on every merged weight."""

PACK_MIN_NUMEL = 1 << 19
"""Merged weights with fewer entries stay on ``F.linear``. At 8 rows the packed product of a
576 × 576 weight was 13 % faster, of a 192 × 576 one 16 % slower, and of the 1,536 × 576 ones
20-54 % faster; at 1 to 4 rows the 576 × 576 one was the same or slower (exploratory timings):
SmolLM2's attention projections stay, its MLP projections are packed."""

_NOWHERE = object()
"""What a :class:`MergedSet`'s layers point at before its first :meth:`~MergedSet.use` and after
:meth:`~MergedSet.close`: neither an adapter nor the base (``None``)."""

_Stack = tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]
"""One layer's updates for :meth:`MergedSet.mix`: ``Aᵀ`` ``[in, R]`` and ``scale · Bᵀ`` ``[R, out]``
of the adapters in use that the layer has, side by side, and the adapter of each rank column."""


def _buffer(w: torch.Tensor, out: torch.Tensor | None, plain: bool = False) -> torch.Tensor:
    """A buffer for a merge of ``w`` in the layout a merged layer runs fastest in (the module
    docstring's Layout): on CPU the transposed view of an input-major buffer, elsewhere (or
    ``plain``: a weight to be packed) a plain tensor. ``out``: an earlier merge of the same weight,
    reused when it still fits."""
    cpu = w.device.type == "cpu" and INPUT_MAJOR and not plain
    fits = out is not None and out.is_contiguous() != cpu
    if not fits or out.shape != w.shape or out.dtype != w.dtype or out.device != w.device:
        out = torch.empty(w.shape[::-1] if cpu else w.shape, dtype=w.dtype, device=w.device)
        out = out.t() if cpu else out
    return out


def merged_sum(
    w: torch.Tensor, delta: torch.Tensor, out: torch.Tensor | None = None, plain: bool = False
) -> torch.Tensor:
    """``w + delta`` into :func:`_buffer`'s layout (``out`` reused where it fits)."""
    return torch.add(w, delta, out=_buffer(w, out, plain))  # elementwise: the same sums in any layout


def merged_weight(
    layer: Any, name: str, w: torch.Tensor, out: torch.Tensor | None = None, plain: bool = False
) -> torch.Tensor:
    """``w`` (``layer``'s base weight) with its LoRA adapter ``name`` merged in, ``w + s · B A``,
    into :func:`_buffer`'s layout: one ``addmm`` (the module docstring), or peft's
    ``get_delta_weight`` and :func:`merged_sum` where the weights are not all ``w``'s dtype or the
    layer stores its weight transposed."""
    a, b = layer.lora_A[name].weight, layer.lora_B[name].weight
    with torch.no_grad():  # a merge is sampled from, never differentiated
        if getattr(layer, "fan_in_fan_out", False) or a.dtype != w.dtype or b.dtype != w.dtype:
            return merged_sum(w, layer.get_delta_weight(name).to(w.dtype), out, plain)
        out = _buffer(w, out, plain)
        scale = float(layer.scaling[name])
        if out.is_contiguous():
            return torch.addmm(w, b, a, alpha=scale, out=out)
        torch.addmm(w.t(), a.t(), b.t(), alpha=scale, out=out.t())  # the input-major buffer itself
        return out


def _lora_layers(peft: Any, name: str) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in peft.modules() if isinstance(m, LoraLayer) and name in getattr(m, "lora_A", {})]


def unmergeable(layers: list[Any], name: str) -> str | None:
    """Why ``name`` cannot be merged exactly into these layers, or ``None`` when it can."""
    for layer in layers:
        base = layer.base_layer
        if type(base) is not torch.nn.Linear:
            return f"{type(base).__name__} base layer (quantised or wrapped)"
        if not base.weight.dtype.is_floating_point:
            return f"{base.weight.dtype} base weights"
        if getattr(layer, "use_dora", {}).get(name, False):
            return "a DoRA adapter"
        if getattr(layer, "lora_bias", {}).get(name, False):  # B's bias: the merges add weights only
            return "a LoRA bias"
    return None


class MergedWeights:
    """Reusable merge buffers for :meth:`merged`; one per :class:`~agon_env.agents.adapters.SharedBase`."""

    keep_buffers: bool = False
    """Keep the buffers between merged blocks (saves an allocation, holds 0.4 GB throughout)."""

    def __init__(self) -> None:
        self._buffers: dict[int, torch.Tensor] = {}
        self._warned: set[str] = set()

    @contextmanager
    def merged(self, peft: Any, name: str) -> Iterator[bool]:
        """Run the block on base weights with ``name`` merged in; yields False (nothing
        changed) when the merge would not be exact -- the caller then samples through peft."""
        layers = _lora_layers(peft, name)
        reason = unmergeable(layers, name) if layers else "no LoRA layers"
        if reason is not None:
            if reason not in self._warned:
                self._warned.add(reason)
                msg = f"sampling unmerged (slower): cannot merge {name!r} exactly: {reason}"
                warnings.warn(msg, stacklevel=3)
            yield False
            return
        originals: list[tuple[torch.nn.Linear, torch.Tensor]] = []
        try:
            with torch.no_grad():
                for layer in layers:
                    lin = layer.base_layer
                    w = lin.weight.data
                    buf = merged_weight(layer, name, w, out=self._buffers.get(id(layer)))
                    self._buffers[id(layer)] = buf
                    originals.append((lin, w))
                    lin.weight.data = buf
            with peft.disable_adapter():
                yield True
        finally:
            for lin, w in originals:
                lin.weight.data = w
            if not self.keep_buffers:
                self._buffers.clear()


@dataclass(eq=False)
class _Kept:
    """One adapter's merged weights as a :class:`MergeStore` keeps them, and what they were merged from."""

    lora: list[tuple[torch.Tensor, torch.Tensor, float] | None]
    """Per wrapped layer, a copy of the adapter's ``A``, ``B`` and scale (None: the layer has none)."""
    base: list[tuple[int, int]]
    """Per wrapped layer, the base weight's storage address and version counter."""
    buffers: list[torch.Tensor | None]
    forwards: list[Any]
    """Per wrapped layer, its ``forward`` on the packed copy of its buffer (:func:`_packed_forwards`)."""


class MergeStore:
    """Merged weights kept between a generation engine's busy spells, at most ``size`` adapters'.

    The engine closes its :class:`MergedSet` whenever it runs out of work, and reopening it merged
    every adapter again: on CPU a fresh merge of SmolLM2-135M took 0.4-2 s, most of it the kernel
    handing out the new buffers' pages, and a server or an evaluation paid it on every burst or
    call (profiled: docs/serving.md). A store keeps the buffers instead, each with a copy of the
    adapter weights it was merged from: at the next use they are compared exactly (``torch.equal``
    on every ``A`` and ``B``, the scale, and the base weight's storage and version), so an adapter
    that changed in any way, an optimizer step or a ``.data.copy_`` alike, is merged again, into the
    same buffers. Past ``size`` adapters the least recently used one's buffers are refilled for the
    newcomer, never more allocated.

    Its cost is memory held while idle: one copy of the wrapped weights per kept adapter (~0.4 GB
    for SmolLM2-135M in fp32). Training keeps none (its update would have that memory on top of its
    own peak); evaluation and serving, whose weights do not change, keep the pair's
    (:class:`~agon_env.runtime.Runtime`)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a merge store keeps at least one adapter, not {size}")
        self.size = size
        self._kept: collections.OrderedDict[str, _Kept] = collections.OrderedDict()
        self.merges = 0
        """Merges computed so far (a kept adapter used again unchanged is not one)."""

    def __contains__(self, name: str) -> bool:
        return name in self._kept

    def merged(
        self, name: str, layers: list[Any], originals: list[torch.Tensor], busy: Collection[str] = ()
    ) -> _Kept:
        """``name`` merged into each of ``layers`` (their base weights ``originals``): the kept
        buffers if nothing they were merged from changed, else merged now into kept buffers (the
        adapter's own, or the least recently used one's when the store is full), and packed.
        ``busy``: the adapters whose buffers the caller is using now, never refilled."""
        lora = _lora_of(layers, name)
        base = [(w.untyped_storage().data_ptr(), w._version) for w in originals]
        kept = self._kept.pop(name, None)
        if kept is not None and kept.base == base and _same_lora(kept.lora, lora):
            self._kept[name] = kept
            return kept
        if kept is None and len(self._kept) >= self.size:
            spare = next((n for n in self._kept if n not in busy), None)
            kept = None if spare is None else self._kept.pop(spare)
        outs = kept.buffers if kept is not None else [None] * len(layers)
        buffers = _merge_into(layers, originals, name, outs)
        self.merges += 1
        snapshot = [None if x is None else (x[0].clone(), x[1].clone(), x[2]) for x in lora]
        kept = self._kept[name] = _Kept(snapshot, base, buffers, _packed_forwards(layers, buffers))
        self.trim(busy={*busy, name})
        return kept

    def touch(self, name: str) -> None:
        """Mark ``name`` the most recently used (:meth:`trim` drops the least recently used first)."""
        if name in self._kept:
            self._kept.move_to_end(name)

    def trim(self, busy: Collection[str] = ()) -> None:
        """Keep at most ``size`` adapters, the most recently used: more are kept only while a
        caller uses more at once (``busy``, never dropped)."""
        idle = [n for n in self._kept if n not in busy]
        for n in idle[: max(len(self._kept) - self.size, 0)]:
            del self._kept[n]


def _lora_of(layers: list[Any], name: str) -> list[tuple[torch.Tensor, torch.Tensor, float] | None]:
    return [
        (m.lora_A[name].weight, m.lora_B[name].weight, float(m.scaling[name]))
        if name in getattr(m, "lora_A", {})
        else None
        for m in layers
    ]


def _same_lora(
    kept: list[tuple[torch.Tensor, torch.Tensor, float] | None],
    now: list[tuple[torch.Tensor, torch.Tensor, float] | None],
) -> bool:
    if len(kept) != len(now):
        return False
    for k, n in zip(kept, now, strict=True):
        if (k is None) != (n is None):
            return False
        if k is not None and n is not None:
            same_shape = k[0].shape == n[0].shape and k[1].shape == n[1].shape
            if not (same_shape and k[2] == n[2] and torch.equal(k[0], n[0]) and torch.equal(k[1], n[1])):
                return False
    return True


def _merge_into(
    layers: list[Any], originals: list[torch.Tensor], name: str, outs: list[torch.Tensor | None]
) -> list[torch.Tensor | None]:
    """``name`` merged into each layer that has it (:func:`merged_weight`, into ``outs`` where they
    fit), in the base layout where the merge is to be packed."""
    with torch.no_grad():
        return [
            merged_weight(m, name, w, out=o, plain=_packs(w)) if name in getattr(m, "lora_A", {}) else None
            for m, w, o in zip(layers, originals, outs, strict=True)
        ]


def _packs(w: torch.Tensor) -> bool:
    """Whether a merge of ``w`` runs packed (the module docstring's Packed)."""
    return PACKED_LINEARS and w.numel() >= PACK_MIN_NUMEL and packed_head.packs(w)


def _packed_forwards(layers: list[Any], buffers: list[torch.Tensor | None]) -> list[Any]:
    """Per layer, a ``forward`` for it on the packed copy of its merged weight; None where it has
    no merge, or one that does not run packed."""
    return [
        packed_head.packed_forward(packed_head.pack(b), b, m.base_layer.bias)
        if b is not None and b.is_contiguous() and _packs(b)
        else None
        for m, b in zip(layers, buffers, strict=True)
    ]


class MergedSet:
    """Several adapters merged at once, each into buffers of its own; :meth:`use` points every
    wrapped layer at one adapter's (or the base's) weights: switching costs pointer moves, not a
    re-merge. The merged weights are those of :meth:`MergedWeights.merged` (the same sum), so a
    batch samples the same tokens under either.

    **Rows of several adapters in one forward** (:meth:`mix`): every wrapped layer runs the merged
    weights of the adapter with the most rows (the *anchor*) once for all rows, so the anchor's rows
    run exactly as merged, and every other row adds its own adapter's update and takes away the
    anchor's, ``(x A_bᵀ) B_bᵀ s_b − (x A_aᵀ) B_aᵀ s_a``: one pair of small matmuls per layer over every
    adapter in use (their ranks side by side) and a matrix of signs that gives each row its own
    columns. At decode shapes on CPU a forward costs about one read of the weights whatever its
    rows, so the generation engine (:mod:`agon_env.agents.engine`) steps a cascade's drafts and
    answers in one forward instead of one per adapter (``benchmarks/mixed_forward_bench.py``
    weighs it: docs/serving.md). The other rows' sums are the merged ones up to float round-off
    (``x (W + B_a A_a) + x (B_b A_b − B_a A_a)`` against ``x (W + B_b A_b)``), so a row sampled
    among another adapter's rows may differ from one sampled alone by that much.

    **Direct.** While it is open, each wrapped layer around a plain ``nn.Linear`` runs its product
    itself: :meth:`use` sets the LoRA layer's ``forward`` to the packed product (the module
    docstring's Packed) or to ``F.linear`` on the weight the layer points at. peft's own ``forward``,
    with the adapters off, would check its arguments and state and then call the base layer as a
    module of its own for the same product: Python that every layer ran at every forward (210 per
    decode step for SmolLM2). :meth:`mix`'s updates are forward hooks on the LoRA layers. Where every
    peft module of the model runs this way, peft's adapters are not switched off either: peft's
    ``disable_adapter()`` surveys every layer's status first, 35 ms on SmolLM2 at every busy spell
    (entered and left, timed alone; a ``benchmarks/rollout_bench.py`` call takes ~5 s), for layers
    it would not run.

    Adapters must not change while it is open (the engine opens it while busy, and updates run
    between generation calls); :meth:`close` restores the base weights, bitwise."""

    def __init__(self, peft: Any, store: MergeStore | None = None) -> None:
        """``store``: where merged weights are kept between openings (:class:`MergeStore`); None:
        each adapter is merged at its first :meth:`use` and freed on :meth:`close`."""
        from peft.tuners.lora import LoraLayer

        self.peft = peft
        self.store = store
        self.layers = [m for m in peft.modules() if isinstance(m, LoraLayer)]
        self.originals = [m.base_layer.weight.data for m in self.layers]
        self.buffers: dict[str, list[torch.Tensor | None]] = {}
        self.forwards: dict[str, list[Any]] = {}
        """Per adapter merged, each layer's packed ``forward`` (None: ``F.linear`` on its buffer)."""
        self._disabled: Any = None
        self._stacks: dict[tuple[str, ...], list[_Stack | None]] = {}
        """Per set of adapters in use, each layer's :data:`_Stack` (None: the layer has none)."""
        self._mixing: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None] | None = None
        """While mixing, per layer: ``Aᵀ``, ``scale · Bᵀ`` and the rows' signs ``[rows, R]``."""
        self._pointed: object = _NOWHERE
        """The adapter (None: the base) the layers' weights and ``forward`` point at now."""
        self._direct = [type(m.base_layer) is torch.nn.Linear for m in self.layers]
        """Per layer, whether :meth:`use` runs it straight on its weight (the class docstring's
        Direct); a layer around anything but a plain ``nn.Linear`` runs peft's ``forward``."""
        self._per_token = False
        self._hooks: list[Any] = []
        self._mergeable: dict[str, bool] = {}
        self.merges = 0
        """Adapters merged while open (one a store gave back unchanged is not merged)."""

    def mergeable(self, name: str) -> bool:
        """Whether ``name`` merges exactly (else the caller samples it through peft)."""
        if name not in self._mergeable:
            layers = [m for m in self.layers if name in getattr(m, "lora_A", {})]
            self._mergeable[name] = bool(layers) and unmergeable(layers, name) is None
        return self._mergeable[name]

    def use(self, name: str | None) -> None:
        """Point the layers at ``name`` merged (``None``: the base weights), peft's adapters off
        where a module still runs through peft (the class docstring's Direct)."""
        if self._disabled is None:
            # looked at here, not at construction: the engine builds sets only to ask ``mergeable``
            direct = [m for m, d in zip(self.layers, self._direct, strict=True) if d]
            runs = _peft_runs(self.peft, direct)
            self._disabled = self.peft.disable_adapter() if runs else contextlib.nullcontext()
            self._disabled.__enter__()
        if name is not None and name not in self.buffers:
            if self.store is not None:
                before = self.store.merges
                kept = self.store.merged(name, self.layers, self.originals, self.buffers)
                self.buffers[name], self.forwards[name] = kept.buffers, kept.forwards
                self.merges += self.store.merges - before
            else:
                bufs = _merge_into(self.layers, self.originals, name, [None] * len(self.layers))
                self.buffers[name], self.forwards[name] = bufs, _packed_forwards(self.layers, bufs)
                self.merges += 1
        elif name is not None and self.store is not None:
            self.store.touch(name)
        bufs = self.buffers.get(name) if name is not None else None
        forwards = self.forwards.get(name) if name is not None else None
        self._mixing = None
        if name == self._pointed:  # the engine asks at every forward: nothing to move
            return
        self._pointed = name
        for i, m in enumerate(self.layers):
            b = None if bufs is None else bufs[i]
            m.base_layer.weight.data = self.originals[i] if b is None else b
            if self._direct[i]:
                f = None if forwards is None else forwards[i]
                # an instance attribute: ``nn.Module.__call__`` finds it first, hooks still run
                m.forward = f if f is not None else _plain_forward(m.base_layer)

    def mix(self, names: list[str | None], per_token: bool = False) -> None:
        """Run row ``i`` of the next forwards with adapter ``names[i]`` (``None``: the base), every
        row in one forward (the class docstring). Every name must be :meth:`mergeable`, and one
        at least not None. ``per_token``: ``names`` name each token of a ``[1, N]`` forward instead
        (several batches packed into one sequence: :mod:`~agon_env.agents.packed_forward`)."""
        counts = collections.Counter(n for n in names if n is not None)
        anchor = max(sorted(counts), key=lambda n: counts[n])  # the most rows: merged, exactly
        self.use(anchor)
        used = tuple(sorted(counts))
        if used not in self._stacks:
            self._stacks[used] = [self._stack(m, used) for m in self.layers]
        if not self._hooks:
            self._hooks = [m.register_forward_hook(self._hook(i)) for i, m in enumerate(self.layers)]
        masks: dict[tuple[str, ...], torch.Tensor] = {}
        mixing: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None] = []
        for stack in self._stacks[used]:
            if stack is None:
                mixing.append(None)
                continue
            a, b, have = stack
            if have not in masks:
                masks[have] = _row_signs(names, have, anchor, a)
            mixing.append((a, b, masks[have]))
        self._mixing = mixing
        self._per_token = per_token

    def _stack(self, m: Any, used: tuple[str, ...]) -> _Stack | None:
        have = tuple(n for n in used if n in getattr(m, "lora_A", {}))
        if not have:
            return None
        w = m.base_layer.weight
        with torch.no_grad():
            a = torch.cat([m.lora_A[n].weight.t() for n in have], dim=1).to(w.dtype).contiguous()
            b = torch.cat([m.lora_B[n].weight.t() * m.scaling[n] for n in have]).to(w.dtype).contiguous()
        return a, b, tuple(n for n in have for _ in range(m.lora_A[n].weight.shape[0]))

    def _hook(self, i: int) -> Any:
        def add_updates(module: torch.nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> Any:
            mixing = self._mixing
            if mixing is None or mixing[i] is None:
                return None
            a, b, signs = mixing[i]
            x = args[0]
            d = torch.matmul(x, a)  # [rows, tokens, R]
            if self._per_token:  # [1, N, R]: a row of signs per token
                d.mul_(signs.view(d.shape))
            else:  # a row of signs per batch row, for all its tokens
                d.mul_(signs.view(signs.shape[0], *([1] * (d.dim() - 2)), signs.shape[1]))
            out.view(-1, out.shape[-1]).addmm_(d.view(-1, d.shape[-1]), b)
            return out

        return add_updates

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks, self._mixing, self._pointed = [], None, _NOWHERE
        self._stacks.clear()
        for m, w in zip(self.layers, self.originals, strict=True):
            m.base_layer.weight.data = w
            m.__dict__.pop("forward", None)
        self.buffers.clear()
        self.forwards.clear()
        if self.store is not None:
            self.store.trim()
        if self._disabled is not None:
            self._disabled.__exit__(None, None, None)
            self._disabled = None


def _peft_runs(peft: Any, direct: list[Any]) -> bool:
    """Whether a module of ``peft`` other than the ``direct`` layers would run an adapter through
    peft (a LoRA layer around another kind of module, a ``modules_to_save`` copy, trainable tokens),
    so peft's adapters must be switched off while a set is open (:class:`MergedSet`'s Direct)."""
    from peft.tuners.tuners_utils import BaseTunerLayer
    from peft.utils import other

    wrappers = (BaseTunerLayer, getattr(other, "AuxiliaryTrainingWrapper", other.ModulesToSaveWrapper))
    skipped = {id(m) for m in direct}
    return any(isinstance(m, wrappers) and id(m) not in skipped for m in peft.modules())


def _plain_forward(lin: torch.nn.Linear) -> Any:
    """``lin``'s own product as a wrapping layer's ``forward``: on whatever its weight points at."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, lin.weight, lin.bias)

    return forward


def _row_signs(
    names: list[str | None], columns: tuple[str, ...], anchor: str, like: torch.Tensor
) -> torch.Tensor:
    """``[rows, R]``: what each rank column (named by its adapter) adds to each row, on weights
    with ``anchor`` merged in: +1 for the row's own adapter's columns and -1 for the anchor's,
    except on the anchor's own rows, which take nothing (the base's rows: only the -1)."""
    signs = [[0.0 if n == anchor else float(c == n) - float(c == anchor) for c in columns] for n in names]
    return torch.tensor(signs, dtype=like.dtype, device=like.device)
