"""One HF generation engine per shared base: requests join at the next decode step and leave when done.

Every HF generation (rollouts, evaluation, the cascade, the server) goes through :class:`Engine`:
:meth:`~agon_env.agents.hf_backend.HFBackend.generate` submits its rows as :class:`Request` objects
and waits. The engine keeps **one running batch** (one KV cache; one forward per decode step,
whatever adapters its rows use) and at every step

* drops every row whose request was cancelled (:meth:`Request.cancel`: a time-out, a client gone,
  the :class:`~agon_env.agents.aborting.Abort` of the call): its KV rows are freed at once, so a
  given-up request holds its slot for at most one more step (in a batch that rows joined, the
  rows after it move down in place and its row is left for the next arrival to take);
* prefills the requests that arrived meanwhile (one forward per adapter among them) and adds them
  to the batch. The batch keeps each prompt prefix its rows share (the few-shot turns; a GRPO
  group's whole prompt) once (:meth:`~agon_env.agents.kv_cache.BufferCache.share_prefix`, read by
  ``agon_sdpa``'s prefix attention); with rows of several prompt families (a cascade's drafts and
  answers) it keeps one prefix per family side by side (its *bank*; each row's attention mask
  picks its own), and drops one as soon as no row reads it. An arrival whose prompt starts with a
  kept prefix of its adapter prefills only its own tail on top of it, and a lone arrival shares
  the prefix it has with its adapter's previous prompt. Rows are joined by
  :func:`~agon_env.agents.kv_cache.concat_caches` (own tokens right-aligned, padding masked, cut
  once no row reads it: :data:`PRUNE_MIN`; arrivals written into the rows finished ones left free
  where they fit, else the batch copied once with rows to spare);
* samples each row with its own parameters and generator, streams the token to its request
  (``on_token``), and drops rows that finished (EOS, a stop string, their ``max_new_tokens``).

**Adapters.** A forward whose rows use one adapter runs it merged into the base weights
(:class:`~agon_env.agents.merge.MergedSet`: every adapter in use merged once into buffers of its
own, switched by pointer), as training's sampling always ran (~2× faster than peft's LoRA layers on
CPU). A forward over rows of several adapters runs the base weights once and adds each row's own
LoRA update (:meth:`~agon_env.agents.merge.MergedSet.mix`): on CPU a forward costs about one read
of the weights however few its rows, so one forward for a cascade's drafts and answers replaces
the two an engine with a batch per adapter ran (or the one of them it let wait; serve_bench's
figures in docs/serving.md). Adapters that cannot merge exactly (DoRA, a quantised base, or
``merge=False``) are sampled through peft, a batch each (:meth:`Engine._key`); with several of
those running, a step runs only the fullest batch, those that just took rows and those left out
:data:`MAX_WAIT` steps (:meth:`Engine._chosen`). The merged weights are freed whenever the engine
runs out of work, as training's update needs that memory, unless the backend keeps them
(``HFBackend(keep_merged=)``, evaluation's and serving's: :class:`~agon_env.agents.merge.MergeStore`).

**Arithmetic.** A caller alone (training, ``agon eval``) gets exactly the batches of the loop it
replaces: its chunks of ``max_batch_size`` rows are admitted one after another (a chunk waits until
it fits), prefilled and kept the same way, under the same merged weights, so fixed-seed runs are
unchanged. Rows that join a running batch change its shape, and rows of other adapters in it make
its forward unmerged: the same tokens up to float round-off. Each row with a seed samples from its
own generator, so a seeded request answers the same alone or in a burst.

**Who runs it.** No thread of its own: a caller whose rows are unfinished runs steps while no other
caller does (:meth:`Engine.run`), and every caller's rows advance in them. Streaming callbacks run
in the stepping caller's thread. The other callers sleep until a step ends rows or the stepping
caller leaves: woken at every step (or polling every 50 ms), sixteen waiting threads took the
GIL from the stepping one often enough to slow its forwards (docs/serving.md).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agon_env.agents import logit_rules, packed_forward
from agon_env.agents.aborting import Aborted, current
from agon_env.agents.kv_cache import BufferCache, concat_caches, shared_prefix_len
from agon_env.agents.merge import MergedSet, MergeStore
from agon_env.agents.packed_head import PackedHead
from agon_env.agents.protocol import SamplingParams
from agon_env.vocabulary import REFERENCE

WAIT_S = 1.0
"""How long a waiting caller sleeps before it looks at its rows unwoken (a safety net only)."""

MIN_SHARED_PREFIX = 8
"""Shorter common prefixes are prefilled per row: a separate prefix pass would cost more."""

PRUNE_MIN = 8
"""Padding columns no row reads are cut from a batch once there are this many (a view, no copy)."""

MAX_WAIT = 3
"""With several adapters running, a batch left out of this many steps in a row runs at the next."""

RIDE = True
"""Prefill an arrival in the running batch's decode forward where it can (:meth:`Engine._ride`,
:mod:`~agon_env.agents.packed_forward`); off: every prefill is a forward of its own."""

PHASES = ("weights", "prefill", "join", "forward", "sample", "drop")
"""The phases of a step :attr:`Engine.seconds` times (its docstring says what each covers)."""

MIXED = "*"
"""The key of the batch whose rows may be of any adapter (:meth:`Engine._key`)."""

CANCELLED = "cancelled"
"""The finish reason of a request that was cancelled before it finished."""


@dataclass(eq=False)
class Request:
    """One row to generate: its prompt, sampling, adapter and generator, and what it got so far."""

    ids: list[int]
    params: SamplingParams
    adapter: str
    generator: torch.Generator | None = None
    """Shared by the rows of one call without per-row seeds; a row's own with a seed; None: greedy."""
    own_generator: bool = False
    """Whether ``generator`` is this row's alone (per-row seeds): sampled with one uniform per row."""
    on_token: Callable[[int], None] | None = None
    out_ids: list[int] = field(default_factory=list)
    out_lp: list[float] = field(default_factory=list)
    out_top: list[list[tuple[int, float]]] = field(default_factory=list)
    """Each step's most likely tokens and log-probs, with ``params.top_logprobs`` (else empty)."""
    finish: str = "length"
    done: bool = False
    cancelled: bool = False
    error: BaseException | None = None
    freed_at: int | None = None
    """The engine step at whose start the row's slot was freed (cancelled rows: the tests read it)."""

    def cancel(self) -> None:
        """End this request at the next step (from any thread); its KV memory is freed then."""
        self.cancelled = True


@dataclass(eq=False)
class _Batch:
    """The running rows: their cache, attention mask (one column per cached token), last positions
    and ``head``: the logits their next token is sampled from, and once sampled, that token (what
    the next forward reads)."""

    rows: list[Request]
    cache: BufferCache
    mask: torch.Tensor
    last_pos: torch.Tensor
    head: torch.Tensor
    key: str = MIXED
    """:data:`MIXED` (rows of any adapters), else the one adapter of its rows (:meth:`Engine._key`)."""
    segments: list[tuple[str, list[int]]] = field(default_factory=list)
    """The prompt prefixes the cache keeps once, side by side in that order (its *bank*: the first
    columns of ``mask``, each row's 1 on its own prefix's): each one's adapter and tokens."""
    waited: int = 0
    """Steps in a row this batch was left out (:data:`MAX_WAIT`)."""
    joined: bool = False
    """Whether rows joined it after its prefill: only then are columns cut (:func:`_prune`), so a
    caller alone keeps the exact arithmetic of the loop the engine replaced."""

    def select(self, keep: list[int]) -> None:
        idx = torch.tensor(keep, device=self.mask.device)
        if self.joined:  # in place: the rows left free take the next arrivals (concat_caches)
            self.cache.compact(keep)
        else:  # a caller alone keeps the loop's exact buffers
            self.cache.batch_select_indices(idx)
        self.mask, self.last_pos, self.head = self.mask[idx], self.last_pos[idx], self.head[idx]
        self.rows = [self.rows[b] for b in keep]


class Engine:
    """Iteration-level scheduling over one shared base (:func:`engine_for`)."""

    def __init__(self, backend: Any) -> None:
        """``backend``: the :class:`~agon_env.agents.hf_backend.HFBackend` whose sampling rules
        (``_sample``, stop strings, EOS ids, prefix sharing) the engine applies."""
        self.backend, self.base = backend, backend.base
        self.waiting: list[list[Request]] = []
        """Groups submitted and not yet admitted, oldest first (a group is prefilled together)."""
        self.batches: dict[str, _Batch] = {}
        """The running rows: one batch (:data:`MIXED`), and one per adapter sampled through peft."""
        self._last: dict[str, list[int]] = {}
        """Each adapter's last prompt: a lone arrival shares its prefix with it (the few-shot turns)."""
        self.steps = 0
        """Decode steps run so far (a step: admit, sample one token per row, one forward)."""
        self.prefills: collections.Counter[int] = collections.Counter()
        """How many prefills admitted each number of requests (one step, one adapter; those that
        rode a decode forward, :attr:`rode`, included): a count per size, so a server that runs for
        weeks keeps at most ``max_batch`` entries, not one per call."""
        self.seconds: collections.Counter[str] = collections.Counter()
        """Wall seconds the steps so far spent in each phase, each counted once (a merge inside a
        prefill is the merge's): ``weights`` (merging adapters, switching them), ``prefill``,
        ``join`` (arrivals joined to the running batch), ``forward`` (decode forwards), ``sample``
        and ``drop`` (finished and cancelled rows' KV freed). What a burst's extra time went to
        (``benchmarks/serve_bench.py --threaded``)."""
        self._inner = 0.0
        self.merges = 0
        """Adapters merged so far (:class:`~agon_env.agents.merge.MergedSet`; with a :attr:`store`,
        an adapter it kept unchanged is not merged again), counted when the engine goes idle."""
        self.rode: collections.Counter[int] = collections.Counter()
        """How many decode forwards prefilled each number of arriving groups too (:meth:`_ride`)."""
        self.forwards: collections.Counter[int] = collections.Counter()
        """How many decode forwards ran over rows of each number of adapters (2 and more: one
        forward for several adapters' rows, :meth:`~agon_env.agents.merge.MergedSet.mix`)."""
        self._cv = threading.Condition()
        self._driving = False
        self._ended = False
        """A step ended rows since the waiting callers were last woken (they wake only then)."""
        self._weights: MergedSet | None = None
        self.store = MergeStore(backend.keep_merged) if backend.keep_merged and backend.merge else None
        """Merged weights kept while idle (``HFBackend(keep_merged=)``); None: merged per busy spell."""
        self.packed_head = PackedHead(keep=self.store is not None)
        """The output head, packed for oneDNN while busy (:mod:`~agon_env.agents.packed_head`),
        kept while idle along with the merged weights."""
        self._peft_ctx: contextlib.ExitStack | None = None
        self._peft_key: str | None = None
        self._open = False
        self._was_training = False

    @contextlib.contextmanager
    def _phase(self, name: str) -> Any:
        """Count the block's wall time under ``name`` in :attr:`seconds`, less its inner phases'."""
        t0, outer, self._inner = time.perf_counter(), self._inner, 0.0
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            self.seconds[name] += dt - self._inner
            self._inner = outer + dt

    # -- callers ---------------------------------------------------------------------

    @property
    def running(self) -> list[Request]:
        return [r for b in list(self.batches.values()) for r in b.rows]

    @property
    def backlog(self) -> int:
        """Requests waiting or generating: the engine's real queue depth."""
        with self._cv:
            return len(self.running) + sum(len(g) for g in self.waiting)

    def counts(self) -> dict[str, float]:
        """What its steps so far did, as numbers (``/health``'s ``engine_counts``, serve_bench's
        ``engine``): decode ``steps``; decode ``forwards``, ``mixed_forwards`` (over rows of several
        adapters) and those a prefill ``rode``; ``prefills``; adapter ``merges``; and the wall
        seconds of each of :data:`PHASES` (``seconds_prefill`` and so on). Safe to call while
        another thread steps (each counter is copied at once)."""
        forwards, prefills, rode, seconds = (
            dict(c) for c in (self.forwards, self.prefills, self.rode, self.seconds)
        )
        return {
            "steps": self.steps,
            "forwards": sum(forwards.values()),
            "mixed_forwards": sum(n for k, n in forwards.items() if k > 1),
            "prefills": sum(prefills.values()),
            "rode": sum(rode.values()),
            "merges": self.merges,
            **{f"seconds_{phase}": seconds.get(phase, 0.0) for phase in PHASES},
        }

    def submit(self, group: Sequence[Request]) -> None:
        """Queue ``group`` (rows prefilled together, admitted at the next step they fit in)."""
        with self._cv:
            self.waiting.append(list(group))

    def run(self, groups: Sequence[Sequence[Request]]) -> None:
        """Submit ``groups`` and run steps (or wait for another caller's) until all their rows end.
        Under a set :func:`~agon_env.agents.aborting.current` abort the rows are cancelled and
        :class:`Aborted` raised; a failed step raises its error in every caller it touched."""
        mine = [r for g in groups for r in g]
        for g in groups:
            self.submit(g)
        abort = current()
        cancel = (lambda: [r.cancel() for r in mine]) if abort is not None else None
        with abort.on_set(cancel) if abort is not None and cancel else contextlib.nullcontext():
            self._drive(mine)
        failed = next((r.error for r in mine if r.error is not None), None)
        if failed is not None:
            raise failed
        if any(r.cancelled for r in mine):
            raise Aborted("the request was given up while generating")

    def _drive(self, mine: list[Request]) -> None:
        while True:
            with self._cv:
                while self._driving and not all(r.done for r in mine):
                    # Woken when a step ends rows (a cancel's included) or the stepper leaves;
                    # the time-out is only a safety net.
                    self._cv.wait(WAIT_S)
                if all(r.done for r in mine):
                    return
                self._driving = True
            try:
                self.step()
            finally:
                with self._cv:
                    self._driving = False
                    if self._ended or all(r.done for r in mine):
                        self._ended = False
                        self._cv.notify_all()

    # -- one step ----------------------------------------------------------------------

    @torch.inference_mode()
    def step(self) -> None:
        """Free cancelled rows, admit and prefill arrivals, sample a token per row, run one forward."""
        with self._cv:
            for g in self.waiting:
                for r in g:
                    if r.cancelled and not r.done:
                        self._end(r, CANCELLED)
            self.waiting = [[r for r in g if not r.done] for g in self.waiting]
            self.waiting = [g for g in self.waiting if g]
            admitted = self._admissible()
        try:
            for batch in list(self.batches.values()):
                self._drop(batch, [b for b, r in enumerate(batch.rows) if r.cancelled], CANCELLED)
            groups = _by_adapter(admitted)
            rides = [self._ride(g) for g in groups]  # each on the batch as it was before any admits
            riding = [g for g, ride in zip(groups, rides, strict=True) if ride]
            joined = {self._admit(g) for g, ride in zip(groups, rides, strict=True) if not ride}
            for batch in self._chosen(joined | ({MIXED} if riding else set())):
                with self._phase("sample"):
                    self._sample(batch)
                if self.batches.get(batch.key) is batch:
                    with self._phase("forward"):
                        if batch.key == MIXED:
                            riding = self._forward(batch, riding)
                        else:
                            self._forward(batch)
            for g in riding:  # the batch they were to ride ended, or dropped their prefix
                self._admit(g)
            self.steps += 1
        except BaseException as exc:
            for r in self.running + [r for g in admitted for r in g]:
                if not r.done:
                    r.error = exc
                    self._end(r, "error")
            self.batches = {}
            self._close()
            raise
        if not self.batches and not self.waiting:
            self._close()

    def _admissible(self) -> list[list[Request]]:
        """Waiting groups, oldest first, while they fit under their ``max_batch_size`` (a group
        always fits an empty engine); called under the lock."""
        taken: list[list[Request]] = []
        count = len(self.running)
        for g in list(self.waiting):
            cap = min(r.params.max_batch_size for r in g)
            # A token budget was met by the caller's chunking: such a group runs on its own.
            budgeted = any(r.params.max_batch_tokens is not None for r in g)
            if count and (count + len(g) > cap or budgeted):
                break
            taken.append(g)
            count += len(g)
            self.waiting.remove(g)
        return taken

    def _end(self, r: Request, reason: str | None = None) -> None:
        """``reason``: the finish reason to record (a cancel, an error); None keeps the row's own."""
        if reason is not None:
            r.finish = reason
        r.freed_at = self.steps
        r.done = True
        self._ended = True

    def _drop(self, batch: _Batch, gone: list[int], reason: str | None = None) -> None:
        """End rows ``gone`` (indices in ``batch``) with ``reason`` and free their KV rows."""
        if not gone:
            return
        for b in gone:
            self._end(batch.rows[b], reason)
        keep = [b for b in range(len(batch.rows)) if b not in set(gone)]
        if not keep:
            del self.batches[batch.key]
            return
        with self._phase("drop"):
            batch.select(keep)
            if batch.joined:
                _prune(batch)

    # -- adapters ----------------------------------------------------------------------

    def _use(self, adapters: str | list[str], per_token: bool = False) -> None:
        """Make the model run ``adapters``: one for every row (merged into the base weights,
        :class:`MergedSet`: one pointer move per layer; else peft's forward told the adapter), or
        one per row (:meth:`MergedSet.mix`; only adapters :meth:`_key` puts in one batch)."""
        model, peft = self.base.model, getattr(self.base, "_peft", None)
        if not self._open:
            self._was_training, self._open = model.training, True
            model.eval()  # sampling never uses dropout; peft's mixed batches require eval mode
            with self._phase("weights"):
                self.packed_head.install(self.base.base_model)
        if peft is None:
            return
        if isinstance(adapters, list):
            with self._phase("weights"):
                self._merged(peft).mix([None if a == REFERENCE else a for a in adapters], per_token)
            return
        if self.backend.merge and (adapters == REFERENCE or self._mergeable(peft, adapters)):
            with self._phase("weights"):
                self._merged(peft).use(None if adapters == REFERENCE else adapters)
            return
        if self._weights is not None:  # peft's own forward needs its adapters on
            self._close_weights()
        if self._peft_key != adapters:  # DoRA, a quantised base, or ``merge=False``
            self._close_peft()
            self._peft_ctx = contextlib.ExitStack()
            use = self.base.sampling if self.backend.merge else self.base.use  # sampling: warns why
            self._peft_ctx.enter_context(use(adapters))
            self._peft_key = adapters

    def _merged(self, peft: Any) -> MergedSet:
        """The open :class:`MergedSet` (opened now if none is), peft's own adapters off."""
        if self._weights is None:
            self._weights = MergedSet(peft, self.store)
        self._close_peft()
        return self._weights

    def _mergeable(self, peft: Any, adapter: str) -> bool:
        if self._weights is None:
            return MergedSet(peft).mergeable(adapter)
        return self._weights.mergeable(adapter)

    def _close_peft(self) -> None:
        if self._peft_ctx is not None:
            self._peft_ctx.close()
        self._peft_ctx, self._peft_key = None, None

    def _close_weights(self) -> None:
        if self._weights is not None:
            self.merges += self._weights.merges
            self._weights.close()
            self._weights = None

    def _close(self) -> None:
        self._close_peft()
        self._close_weights()
        self.packed_head.remove()
        if self._open:
            self.base.model.train(self._was_training)
            self._open = False

    def _extra(
        self, cache: BufferCache, adapters: str | list[str], per_token: bool = False
    ) -> dict[str, Any]:
        """The forward's keywords, the model made to run ``adapters`` (:meth:`_use`)."""
        self._use(adapters, per_token)
        return {} if cache.shared_prefix(0) is None else {"shared_prefix": cache}

    def _key(self, adapter: str) -> str:
        """Which running batch takes rows of ``adapter``: the one shared by every adapter whose rows
        can run in one forward (:meth:`~agon_env.agents.merge.MergedSet.mix`: plain LoRA on a plain
        base, merging on), else a batch of its own, sampled through peft."""
        peft = getattr(self.base, "_peft", None)
        if peft is None or (self.backend.merge and (adapter == REFERENCE or self._mergeable(peft, adapter))):
            return MIXED
        return adapter

    def _extra_rows(self, batch: _Batch) -> dict[str, Any]:
        """:meth:`_extra` for a decode step of ``batch``: its rows' adapter, or each row its own."""
        names = [r.adapter for r in batch.rows]
        if batch.key != MIXED:
            return self._extra(batch.cache, batch.key)
        return self._extra(batch.cache, names if len(set(names)) > 1 else names[0])

    # -- prefill, merge, sample, forward -------------------------------------------------

    def _ride(self, rows: list[Request]) -> bool:
        """Whether ``rows`` (one adapter) can be prefilled in the running batch's next decode
        forward instead of one of their own: it is the :data:`MIXED` batch, keeps a prefix of their
        adapter their prompts all start with, and the model runs packed forwards. Rows that ride
        take their first token at the step after, as a prefill of their own would have given it
        at the start of that step; the decode forward costs little more, the prefill's read of
        the weights is saved (:mod:`~agon_env.agents.packed_forward`)."""
        batch = self.batches.get(MIXED)
        if not RIDE or batch is None or self._key(rows[0].adapter) != MIXED:
            return False
        return _segment_of(batch, rows) is not None and packed_forward.packable(self.base.base_model)

    def _chosen(self, joined: set[str]) -> list[_Batch]:
        """The batches this step runs: with one running (always, unless adapters are sampled
        through peft, a batch each), it; with several, the one with the most rows, those that just
        took new rows (their first token is due) and those left out :data:`MAX_WAIT` steps. On CPU
        a forward costs one read of the weights whatever its rows, so stepping every batch at every
        step paid that read once per batch."""
        batches = list(self.batches.values())
        if len(batches) <= 1:
            return batches
        largest = max(batches, key=lambda b: len(b.rows))
        chosen = [b for b in batches if b is largest or b.key in joined or b.waited >= MAX_WAIT]
        for b in batches:
            b.waited = 0 if b in chosen else b.waited + 1
        return chosen

    def _admit(self, rows: list[Request]) -> str:
        """Prefill ``rows`` (one adapter) and add them to their running batch (:meth:`_key`): on
        top of a prefix it keeps once (of their adapter) where their prompts start with it, else
        as rows of their own, their own shared prefix kept once beside the batch's."""
        adapter = rows[0].adapter
        key = self._key(adapter)
        batch = self.batches.get(key)
        on = None if batch is None else _segment_of(batch, rows)
        with self._phase("prefill"):
            new = self._prefill(rows, key, on=None if batch is None or on is None else (batch, on))
        if batch is None:
            self.batches[key] = new
        else:
            with self._phase("join"):
                self.batches[key] = _join(batch, new)
        self._last[adapter] = rows[-1].ids
        return key

    def _prefill(self, rows: list[Request], key: str, on: tuple[_Batch, int] | None = None) -> _Batch:
        """The rows' prompts in one forward: a batch of their own. ``on``: a running batch and the
        index of the kept-once prefix (a segment of its bank) they start with: only their tails
        are computed, reading that prefix; else their own shared prefix first, once (a lone row
        shares the one it has with its adapter's last prompt)."""
        part, segments = self._part(rows, on)
        out = self.base.model(
            input_ids=part.ids,
            attention_mask=part.mask,
            position_ids=part.positions,
            past_key_values=part.cache,
            use_cache=True,
            logits_to_keep=1,
            **self._extra(part.cache, rows[0].adapter),
        )
        head = out.logits[:, -1, :]
        return _Batch(rows, part.cache, part.mask, part.positions[:, -1:], head, key, segments)

    def _part(
        self, rows: list[Request], on: tuple[_Batch, int] | None
    ) -> tuple[packed_forward.Part, list[tuple[str, list[int]]]]:
        """What :meth:`_prefill`'s forward over the rows' prompt tails is given (their shared prefix
        computed first where they do not start on a running batch's), and the prefixes their cache
        keeps once."""
        backend, device = self.backend, self.base.device
        ids = [r.ids for r in rows]
        n, adapter = len(rows), rows[0].adapter
        self.prefills[n] += 1
        bank, start = 0, 0
        if on is not None:
            running, index = on
            lengths = [len(t) for _, t in running.segments]
            bank, start, shared = sum(lengths), sum(lengths[:index]), lengths[index]
        else:
            shared = backend._shared_prefix(ids, [r.adapter for r in rows])
            last = self._last.get(adapter)
            if not shared and n == 1 and last is not None and backend._prefix_once():
                shared = shared_prefix_len([ids[0], last], MIN_SHARED_PREFIX)
            bank = shared
        tails = [x[shared:] for x in ids]
        width = max(len(x) for x in tails)
        input_ids = torch.full((n, width), backend.pad_id, dtype=torch.long)
        mask = torch.zeros((n, bank + width), dtype=torch.long)
        mask[:, start : start + shared] = 1
        for b, x in enumerate(tails):
            input_ids[b, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[b, bank + width - len(x) :] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        # Positions follow the real tokens, so the padding and other prefixes are invisible.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -width:]
        most = max(r.params.max_new_tokens for r in rows)
        cache = BufferCache(num_layers(self.base.base_model), bank + width + most)
        model = self.base.model
        if on is not None:
            for layer, running_layer in zip(cache.layers, on[0].cache.layers, strict=True):
                layer.prefix = running_layer.prefix  # the same tensors: kept once for both
        elif shared:
            model(
                input_ids=torch.tensor([ids[0][:shared]], device=device),
                position_ids=torch.arange(shared, device=device)[None],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
                **self._extra(cache, adapter),
            )
            if backend._prefix_once():
                cache.share_prefix(n)
            else:
                cache.batch_repeat_interleave(n)
        if on is not None:
            segments = on[0].segments
        elif cache.shared_prefix(0) is not None:
            segments = [(adapter, list(ids[0][:shared]))]
        else:
            segments = []
        return packed_forward.Part(input_ids, mask, positions, cache), segments

    def _sample(self, batch: _Batch) -> None:
        """One token per row from its logits, with its parameters and generator; finished rows leave."""
        n = len(batch.rows)
        tok = torch.empty(n, dtype=torch.long, device=batch.head.device)
        lp = torch.empty(n, dtype=torch.float32, device=batch.head.device)
        alts: list[list[tuple[int, float]] | None] = [None] * n
        for idx, params, gen in _sampling_groups(batch.rows):
            whole = len(idx) == n
            logits = batch.head if whole else batch.head[torch.tensor(idx, device=tok.device)]
            if params.repetition_penalty != 1.0 or params.min_tokens > 0:
                logits = self._shaped(logits, params, [batch.rows[b] for b in idx])
            t, p, top = self.backend._sample(logits, params, gen)
            if top is not None:
                for j, b in enumerate(idx):
                    alts[b] = logit_rules.alternatives_of(top, j)
            if whole:
                tok, lp = t, p.float()
            else:
                tok[idx], lp[idx] = t, p.float()
        finished: list[int] = []
        for b, (r, t, p) in enumerate(zip(batch.rows, tok.tolist(), lp.tolist(), strict=True)):
            r.out_ids.append(t)
            r.out_lp.append(p)
            if alts[b] is not None:
                r.out_top.append(alts[b])
            if r.on_token is not None:
                r.on_token(t)
            stops = r.params.stop
            window = max((len(s) for s in stops), default=0) + 2
            # EOS unless ignore_eos, and stop_token_ids, end a row; stop strings count from min_tokens on.
            ends = t in logit_rules.enders(self.backend.eos_ids, r.params)
            counts = len(r.out_ids) >= r.params.min_tokens
            if ends or (stops and counts and self.backend._stop_hit(r.out_ids, r.params, window)):
                r.finish = "stop"
                finished.append(b)
            elif len(r.out_ids) >= r.params.max_new_tokens:
                finished.append(b)
        batch.mask = torch.cat([batch.mask, batch.mask.new_ones(n, 1)], dim=-1)
        batch.last_pos = batch.last_pos + 1
        batch.head = tok
        self._drop(batch, finished)

    def _shaped(self, logits: torch.Tensor, params: SamplingParams, rows: list[Request]) -> torch.Tensor:
        """``logits`` with vLLM's repetition penalty and ``min_tokens`` mask, row by row: rows that
        joined at different steps have produced different numbers of tokens."""
        ending = logit_rules.enders(self.backend.eos_ids, params)
        return torch.cat(
            [
                logit_rules.shape(logits[i : i + 1], params, [[*r.ids, *r.out_ids]], len(r.out_ids), ending)
                for i, r in enumerate(rows)
            ]
        )

    def _forward(self, batch: _Batch, riding: Sequence[list[Request]] = ()) -> list[list[Request]]:
        """One decode step of ``batch``; the arrivals ``riding`` (groups of rows of the batch's
        :data:`MIXED` key) prefilled in the same forward where their prompts start with a prefix
        it keeps (:meth:`_ride`) and joined to it after. Returns the groups that could not ride
        (the batch dropped the prefix they start with while sampling): the caller admits them."""
        rides, left = [], []
        for group in riding:
            on = _segment_of(batch, group)
            (left if on is None else rides).append((group, on))
        if rides:
            self._forward_with(batch, rides)
            return [g for g, _ in left]
        self.forwards[len({r.adapter for r in batch.rows})] += 1
        out = self.base.model(
            input_ids=batch.head[:, None],
            attention_mask=batch.mask,
            position_ids=batch.last_pos,
            past_key_values=batch.cache,
            use_cache=True,
            **self._extra_rows(batch),
        )
        batch.head = out.logits[:, -1, :]
        return [g for g, _ in left]

    def _forward_with(self, batch: _Batch, rides: list[tuple[list[Request], int]]) -> None:
        """``batch``'s decode step and the prefill of each riding group (rows, the index of the
        prefix of ``batch``'s bank they start with) in one packed forward, then each group joined."""
        parts = [packed_forward.Part(batch.head[:, None], batch.mask, batch.last_pos, batch.cache)]
        names = [r.adapter for r in batch.rows]
        arrived = []
        for group, on in rides:
            part, segments = self._part(group, (batch, on))
            parts.append(part)
            names += [group[0].adapter] * part.ids.numel()  # the adapters are named per token
            arrived.append((group, part, segments))
        self.forwards[len(set(names))] += 1
        self.rode[len(rides)] += 1
        self._use(names if len(set(names)) > 1 else names[0], per_token=True)
        logits = packed_forward.forward(self.base.model, parts)
        batch.head = logits[0]
        for (group, part, segments), head in zip(arrived, logits[1:], strict=True):
            new = _Batch(group, part.cache, part.mask, part.positions[:, -1:], head, MIXED, segments)
            with self._phase("join"):
                self.batches[MIXED] = _join(self.batches[MIXED], new)
            self._last[group[0].adapter] = group[-1].ids


def _segment_of(batch: _Batch, rows: list[Request]) -> int | None:
    """The longest prefix ``batch`` keeps once that every row's prompt starts with (and goes on
    after), computed under the rows' adapter: its index in the bank, or None."""
    adapter, best, longest = rows[0].adapter, None, 0
    for j, (owner, tokens) in enumerate(batch.segments):
        if owner != adapter or len(tokens) <= longest:
            continue
        if all(len(r.ids) > len(tokens) and r.ids[: len(tokens)] == tokens for r in rows):
            best, longest = j, len(tokens)
    return best


def _join(old: _Batch, new: _Batch) -> _Batch:
    """``old``'s rows then ``new``'s in one batch: their own tokens right-aligned (padding
    masked). Prefixes stay kept once: ``new``'s, if it is not ``old``'s bank itself, goes after the
    bank's prefixes that some row of ``old`` still reads (the others are dropped)."""
    rows, k = old.rows + new.rows, len(old.rows)
    room = max(r.params.max_new_tokens - len(r.out_ids) for r in rows)
    p_old, p_new = _bank(old), _bank(new)
    prefix = new.cache.shared_prefix(0)
    if prefix is not None and prefix is old.cache.shared_prefix(0):  # prefilled on old's bank
        keep, segments, kept_cols, new_at = None, old.segments, list(range(p_old)), 0
    else:
        keep, live = _read_segments(old)
        segments = live + new.segments
        kept_cols = [c for s, e in keep for c in range(s, e)]
        new_at = len(kept_cols)
    cache = concat_caches(old.cache, new.cache, room, keep)
    width = cache.get_seq_length()
    mask = torch.zeros((len(rows), width), dtype=old.mask.dtype, device=old.mask.device)
    mask[:k, : len(kept_cols)] = old.mask[:, torch.tensor(kept_cols, dtype=torch.long, device=mask.device)]
    mask[k:, new_at : new_at + p_new] = new.mask[:, :p_new]
    mask[:k, width - (old.mask.shape[1] - p_old) :] = old.mask[:, p_old:]
    mask[k:, width - (new.mask.shape[1] - p_new) :] = new.mask[:, p_new:]
    last_pos = torch.cat([old.last_pos, new.last_pos])
    head = torch.cat([old.head, new.head.to(old.head.dtype)])
    return _Batch(rows, cache, mask, last_pos, head, old.key, segments, joined=True)


def _prune(batch: _Batch) -> None:
    """Stop reading columns no row of ``batch`` reads any more: a kept-once prefix whose rows all
    left, and own-token columns left of every remaining row's first (padding kept for rows that
    left). Each decode step reads every column of the cache, so these cost at every step."""
    keep, segments = _read_segments(batch)
    at = _bank(batch)
    own = batch.mask.bool().any(0)[at:]
    own_from = int(own.float().argmax()) if bool(own.any()) else own.shape[0]
    dead_prefix = len(segments) < len(batch.segments)
    if not dead_prefix and own_from < PRUNE_MIN:
        return
    cols = [c for s, e in keep for c in range(s, e)] + list(range(at + own_from, batch.mask.shape[1]))
    batch.cache.trim(keep if dead_prefix else None, own_from)
    batch.mask = batch.mask[:, torch.tensor(cols, dtype=torch.long, device=batch.mask.device)]
    batch.segments = segments


def _read_segments(batch: _Batch) -> tuple[list[tuple[int, int]], list[tuple[str, list[int]]]]:
    """The kept-once prefixes some row of ``batch`` still reads: their column ranges in the bank,
    and the prefixes themselves (in bank order)."""
    read = batch.mask.bool().any(0)
    keep, segments, at = [], [], 0
    for seg in batch.segments:
        if bool(read[at : at + len(seg[1])].any()):
            keep.append((at, at + len(seg[1])))
            segments.append(seg)
        at += len(seg[1])
    return keep, segments


def _bank(batch: _Batch) -> int:
    """How many of ``batch.mask``'s first columns are its kept-once prefixes."""
    return sum(len(t) for _, t in batch.segments)


def _by_adapter(groups: list[list[Request]]) -> list[list[Request]]:
    """Admitted groups coalesced per adapter (arrival order): one prefill each. A caller alone
    has one group, prefilled as before."""
    out: dict[str, list[Request]] = {}
    for g in groups:
        for r in g:
            out.setdefault(r.adapter, []).append(r)
    return list(out.values())


def _sampling_groups(rows: Sequence[Request]) -> list[tuple[list[int], SamplingParams, Any]]:
    """Rows that sample in one call: the same parameters and either one shared generator, or each
    their own (a list, one uniform per row). Row order is kept within a group."""
    groups: list[tuple[list[int], SamplingParams, Any]] = []
    for b, r in enumerate(rows):
        for idx, params, gen in groups:
            same_gen = (isinstance(gen, list) and r.own_generator) or (
                not r.own_generator and gen is r.generator
            )
            if params == r.params and same_gen:
                idx.append(b)
                if isinstance(gen, list):
                    gen.append(r.generator)
                break
        else:
            gen = [r.generator] if r.own_generator else r.generator
            groups.append(([b], r.params, gen))
    return groups


def num_layers(model: Any) -> int:
    return int(packed_forward.text_config(model).num_hidden_layers)


_LOCK = threading.Lock()


def engine_for(backend: Any) -> Engine:
    """The one engine of ``backend``'s base (and merge / prefix-attention settings): the agents of
    a pair each hold a backend, and their requests must share one running batch."""
    key = ("_agon_engines", bool(backend.merge), bool(backend.prefix_attention), backend.keep_merged)
    with _LOCK:
        engines = backend.base.__dict__.setdefault(key[0], {})
        if key[1:] not in engines:
            engines[key[1:]] = Engine(backend)
        return engines[key[1:]]
