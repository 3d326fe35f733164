"""The output head run from a oneDNN-packed copy of its weight while the generation engine samples.

At decode shapes the head is the largest matmul of a step: SmolLM2-135M's is 49,152 × 576, a
fifth of the model's weights, read once per step for a few dozen rows of logits. ``F.linear``
gives MKL that weight as a transposed operand, which it read at 4 GB/s against the 6 GB/s of
the decoder's merged weights: 28 ms of each ~160 ms decode step at 8 rows (``torch.profiler``
over a ``benchmarks/rollout_bench.py`` call).
oneDNN's linear with the weight reordered once into its own blocked layout
(``torch.ops.mkldnn._reorder_linear_weight``, the op inductor's CPU weight freezing uses) ran the
same product 2.4× faster at 8 rows and 3.5× at 15 on this machine's cores. While the engine is
busy, :class:`PackedHead` points the head's ``forward`` at that product; its figures, with their
commands, are in docs/benchmarks.md ("The output head, packed"). :func:`pack` and
:func:`packed_forward` run the MLP's merged weights the same way (:mod:`~agon_env.agents.merge`,
"Packed").

**Arithmetic.** oneDNN sums in another order than MKL at large hidden sizes: SmolLM2's logits
moved by up to 1.5e-5 (``benchmarks/packed_head_bench.py``; the tiny test models' heads, 32-128
wide, gave the same bits). From :data:`MIN_ROWS` rows on, a row's logits do not depend on how
many rows share the product (``tests/agents/test_packed_head.py``, 4 to 40 rows), where
``F.linear``'s do; fewer rows run ``F.linear``, which is the faster there.

**Not covered**, and run by ``F.linear`` as before: a head off the CPU, not fp32, wrapped by an
adapter (LoRA on ``lm_head``) or quantised, and any torch built without oneDNN. The packed copy
has no autograd: it is installed only for the engine's inference-mode forwards and removed when
the engine goes idle, before any update runs. It is packed again whenever the head's weight
storage or version changed, the check the merged weights apply to the frozen base
(:class:`~agon_env.agents.merge.MergeStore`). Its memory is one more copy of the head (113 MB for
SmolLM2, 622 MB for Qwen3-0.6B's vocabulary): kept between busy spells only where the merged
weights are kept too (evaluation and serving), else freed at idle and repacked (~50 ms) at the
next spell.
"""

from __future__ import annotations

from typing import Any

import torch

PACKED_HEAD = True
"""Run the engine's output head packed for oneDNN where it can (the module docstring); off: ``F.linear``."""

PACK_ROWS = 16
"""The row count oneDNN's weight layout is chosen for (the reorder's batch-size hint); any count
runs on it. 8 and 16 gave the same speed at 8 and 15 rows; 1 was slower past 2 rows (an
exploratory timing)."""

MIN_ROWS = 4
"""Fewer rows run ``F.linear``: at 1 to 3 rows the packed product was the slower, 10.0 against
8.2 ms at 1 row and 12.5 against 11.0 at 3, where at 4 it took 11.0 against 18.6
(``benchmarks/packed_head_bench.py --rows 1 2 3 4 8 15 32 --reps 30``)."""


def packable(head: Any) -> bool:
    """Whether ``head`` is a plain fp32 CPU ``nn.Linear`` and this torch has oneDNN's linear."""
    return PACKED_HEAD and type(head) is torch.nn.Linear and packs(head.weight)


def packs(w: torch.Tensor) -> bool:
    """Whether a linear weight ``w`` can run packed: fp32 on the CPU, and a torch with oneDNN's linear."""
    if w.device.type != "cpu" or w.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight  # noqa: B018  (present in builds with oneDNN)
        torch.ops.mkldnn._linear_pointwise  # noqa: B018
    except (AttributeError, RuntimeError):
        return False
    return True


def pack(w: torch.Tensor) -> torch.Tensor:
    """``w`` (``[out, in]``, any strides) reordered into oneDNN's blocked layout, without autograd."""
    with torch.no_grad():
        return torch.ops.mkldnn._reorder_linear_weight(w.detach(), PACK_ROWS)


def product(rows: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """oneDNN's linear of ``rows`` (``[n, in]``) on ``packed`` (:func:`pack`), at any row count."""
    return torch.ops.mkldnn._linear_pointwise(rows, packed, bias, "none", [], "")


def packed_forward(packed: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> Any:
    """A linear layer's ``forward`` on ``packed`` (:func:`pack` of ``weight``): oneDNN's product from
    :data:`MIN_ROWS` rows on, ``F.linear`` on ``weight`` below."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] < MIN_ROWS:
            return torch.nn.functional.linear(x, weight, bias)
        y = product(rows, packed, bias)
        return y.view(*x.shape[:-1], y.shape[-1])

    return forward


class PackedHead:
    """One model's output head, packed once and installed while the engine is busy."""

    def __init__(self, keep: bool) -> None:
        """``keep``: hold the packed copy between busy spells (else freed at :meth:`remove`)."""
        self.keep = keep
        self.packs = 0
        """How many times the weight was packed (once per busy spell without ``keep``)."""
        self._packed: torch.Tensor | None = None
        self._of: tuple[int, int, tuple[int, ...]] | None = None
        self._head: torch.nn.Module | None = None

    def install(self, model: Any) -> bool:
        """Run ``model``'s head from the packed weight (packed now if it is missing or stale);
        False, and nothing changed, where the head is not :func:`packable`."""
        outputs = getattr(model, "get_output_embeddings", None)
        head = outputs() if outputs is not None else None
        if head is None or not packable(head):
            return False
        w = head.weight
        of = (w.untyped_storage().data_ptr(), w._version, tuple(w.shape))
        if self._packed is None or self._of != of:
            self._packed = pack(w)
            self._of = of
            self.packs += 1
        # an instance attribute: ``nn.Module.__call__`` finds it first
        head.forward = packed_forward(self._packed, head.weight, head.bias)
        self._head = head
        return True

    def remove(self) -> None:
        """Give the head its own ``forward`` back; drop the packed copy unless kept."""
        if self._head is not None:
            self._head.__dict__.pop("forward", None)
            self._head = None
        if not self.keep:
            self._packed, self._of = None, None
