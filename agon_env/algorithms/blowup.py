"""Blow-ups: an update that wrecks a policy with finite weights is caught like a NaN one.

:mod:`.update` already rolls back a step whose weights went inf or NaN. A finite step can wreck
a policy just as surely (``--lr 1e30`` left weights near 7.5e29 and every completion empty,
exit 0), so two more things are watched, each against a stated bound:

* **the step's size**: ``‖Δθ‖ / ‖θ‖`` of the adapter's weights over one optimiser step.
  AdamW moves each weight by about the learning rate, and LoRA weights are about 1e-2, so
  at the default 2e-4 a step is ~1e-2 of the weights; above :data:`UPDATE_RATIO_MAX` the step
  replaced the adapter rather than nudged it, and is rolled back with the optimiser's state.
* **the policy's output**: the share of an adapter's completions that are empty or unparsable
  (``format_ok`` false) on the rollout after its update, per role, against its last rollout in
  that role (a challenger misses the format more than a drafter, and roles swap). A jump
  that a one-sided Fisher exact test puts below :data:`COLLAPSE_P` *and* reaches
  :data:`COLLAPSE_SHARE` is a collapse: the update is rolled back (the weights and optimiser
  state from before it, kept for this) and the step's rollout replayed on them.

Either counts in ``blowups`` (checkpointed). :data:`BLOWUP_REPEATS` blow-ups of one adapter in
a row -- no update between them that passed both watches -- stop the run with
:class:`BlowUp` (exit 2), naming the adapter, the step and the figure; the weights of a
blown-up update are never saved (the run stops before any save). An absurd learning rate
never gets this far: :data:`LR_MAX` bounds ``optim.lr`` in the config's validation.

Nothing here changes what a run that does not blow up computes: the watch reads the weights
and the completions, and keeps a copy of the weights and optimiser state before each update.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch

from agon_env.algorithms.errors import BlowUp
from agon_env.episodes import Turn
from agon_env.stats import fisher_greater

LR_MAX = 1.0
"""The largest ``optim.lr`` accepted: AdamW moves each weight by about ``lr`` per step, and LoRA
weights are about 1e-2, so a rate of 1 replaces them on the first step."""
UPDATE_RATIO_MAX = 1.0
"""``‖Δθ‖ / ‖θ‖`` above this for one optimiser step is a blow-up: the step moved the adapter by
more than the adapter itself."""
COLLAPSE_P = 1e-4
"""One-sided Fisher exact p below which the rise in unusable completions is no chance."""
COLLAPSE_SHARE = 0.5
"""...and the share of unusable completions after the update at least this: most of them."""
BLOWUP_REPEATS = 2
"""Blow-ups of one adapter in a row (each rolled back) that stop the run."""


def update_ratio(after: Iterable[torch.Tensor], before: Iterable[torch.Tensor]) -> float:
    """``‖after − before‖ / ‖before‖`` over all the tensors together (``inf`` when the weights
    were all zero and moved, 0 when they did not move)."""
    pairs = list(zip(after, before, strict=True))
    if not pairs:
        return 0.0
    # Summed on the device, read once: one sync per step, not one per LoRA matrix.
    moved = float(torch.stack([(a.detach().float() - b.float()).pow(2).sum() for a, b in pairs]).sum())
    total = float(torch.stack([b.float().pow(2).sum() for _, b in pairs]).sum())
    if total == 0.0:
        return 0.0 if moved == 0.0 else float("inf")
    return (moved / total) ** 0.5


def unusable(turn: Turn) -> bool:
    """Empty (no token, or only whitespace) or unparsable: nothing the task can read."""
    c = turn.completion
    return not c.completion_ids or not (c.text or "").strip() or not turn.format_ok


Stream = tuple[str, str]
"""``(adapter, role)``: an adapter's completions in one role. A drafter and a challenger fail the
format at different rates (and roles swap every step), so each is held to its own past."""


def unusable_counts(turns: Iterable[Turn], adapter_of: Mapping[str, str]) -> dict[Stream, tuple[int, int]]:
    """Per ``(adapter, role)`` (``adapter_of`` maps a seat to its adapter): (unusable, completions)."""
    out: dict[Stream, tuple[int, int]] = {}
    for t in turns:
        key = (adapter_of.get(t.seat, t.seat), t.role)
        bad, n = out.get(key, (0, 0))
        out[key] = (bad + unusable(t), n + 1)
    return out


def collapse_p(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The Fisher p of a collapse from ``before`` to ``after`` (unusable, completions), or None
    when it is none: the rise is within chance, or most completions are still usable."""
    (b_bad, b_n), (a_bad, a_n) = before, after
    if a_n == 0 or a_bad < COLLAPSE_SHARE * a_n:
        return None
    p = fisher_greater(a_bad, a_n, b_bad, b_n)
    return p if p < COLLAPSE_P else None


Snapshot = tuple[list[torch.Tensor], dict[str, object]]
"""An adapter's weights and its optimiser's state, as before an update."""


def snapshot(params: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer) -> Snapshot:
    return [p.detach().clone() for p in params], copy.deepcopy(optimizer.state_dict())


def restore(params: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer, saved: Snapshot) -> None:
    with torch.no_grad():
        for p, s in zip(params, saved[0], strict=True):
            p.copy_(s)
    optimizer.load_state_dict(saved[1])


@dataclass
class BlowupWatch:
    """The blow-up count of a run and each adapter's streak of blow-ups in a row."""

    counters: dict[str, float]
    """The run's checkpointed counters (``blowups`` is added to them)."""
    streak: dict[str, int] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    """Adapters whose last update passed the size watch and awaits the next rollout's verdict."""
    before: dict[Stream, tuple[int, int]] = field(default_factory=dict)
    """Per ``(adapter, role)``: (unusable, completions) of the last rollout it played that role in
    and no update was rolled back after."""
    saved: dict[str, Snapshot] = field(default_factory=dict)
    """Per adapter: weights and optimiser state from before its last update."""

    def __post_init__(self) -> None:
        self.counters.setdefault("blowups", 0)

    def blew_up(self, adapter: str, step: int, what: str) -> None:
        """Count a blow-up of ``adapter`` (already rolled back); stop when it keeps happening."""
        self.counters["blowups"] += 1
        self.streak[adapter] = self.streak.get(adapter, 0) + 1
        self.pending.discard(adapter)
        if self.streak[adapter] >= BLOWUP_REPEATS:
            raise BlowUp(
                f"step {step}: {adapter}'s update blew up on {self.streak[adapter]} updates in a row "
                f"({what}; each rolled back, none saved): lower --optim.lr"
            )

    def passed(self, adapter: str) -> None:
        """An optimiser step of ``adapter`` within :data:`UPDATE_RATIO_MAX`: the next rollout judges it."""
        self.pending.add(adapter)

    def collapsed(self, now: Mapping[Stream, tuple[int, int]]) -> dict[str, str]:
        """The adapters whose last update collapsed their output on this rollout, each with what
        was seen (the caller rolls them back, then counts them with :meth:`blew_up`). ``now`` is
        this rollout's (unusable, completions) per ``(adapter, role)``, each held to that
        stream's last rollout."""
        out: dict[str, str] = {}
        played = {name for name, _ in now}
        for (name, role), after in sorted(now.items()):
            if name in out or name not in self.pending or name not in self.saved:
                continue
            if (name, role) not in self.before:
                continue  # its first rollout in this role: nothing to hold it to
            p = collapse_p(self.before[(name, role)], after)
            if p is not None:
                (b_bad, b_n), (a_bad, a_n) = self.before[(name, role)], after
                out[name] = (
                    f"its unusable {role} completions rose from {b_bad}/{b_n} to {a_bad}/{a_n}, one-sided "
                    f"Fisher p = {p:.2g} < {COLLAPSE_P:g}"
                )
        for name in played & self.pending:
            self.pending.discard(name)
            if name not in out:
                self.streak[name] = 0  # an update that passed both watches
        return out
