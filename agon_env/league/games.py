"""What a league game is: a snapshot in a seat, and what one pairing played on each problem.

A *player* is one adapter of one run at one training step (its snapshot). A *pairing* puts one
player in the drafter's seat and one in the challenger's: the drafter drafts each held-out
problem (the same problems and sampling seeds for every pairing, so a drafter's drafts are the
same whoever challenges them), the challenger reads the draft's summary and answers. Each
outcome is ``True``/``False`` as judged, or ``None`` when the problem's checker could not judge
the answer (unjudged answers are neither right nor wrong, as everywhere in agon-env).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

Outcome = bool | None
"""One answer's verdict: right, wrong, or unjudged (``None``)."""


@dataclasses.dataclass(frozen=True, order=True)
class Player:
    """One adapter of one run at one training step."""

    run: str
    """The run's label: its folder name, or ``<arm>-seed<k>`` for a study's unit."""
    adapter: str
    """The adapter's name in the run (``agent_a``, ``agent_b``; a GRPO arm's single adapter)."""
    step: int
    """The training step whose snapshot this is (the last step for a run's final adapters)."""

    @property
    def id(self) -> str:
        """``run:adapter@step``, the player's name in league.json and in the pictures."""
        return f"{self.run}:{self.adapter}@{self.step}"

    def to_record(self) -> dict[str, str | int]:
        """The player as JSON (pairings.jsonl, league.json)."""
        return {"run": self.run, "adapter": self.adapter, "step": self.step}

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Player:
        return cls(str(r["run"]), str(r["adapter"]), int(r["step"]))


@dataclasses.dataclass(frozen=True)
class Pairing:
    """What one drafter and one challenger played, problem by problem (the same order everywhere)."""

    drafter: Player
    challenger: Player
    problems: tuple[str, ...]
    """The held-out problems' ids, in the league's order."""
    draft_correct: tuple[Outcome, ...]
    """The drafter's own answer on each problem (the draft's ``<answer>``), as judged."""
    final_correct: tuple[Outcome, ...]
    """The challenger's answer on each problem: the cascade's answer, as judged."""

    def __post_init__(self) -> None:
        sizes = {len(self.problems), len(self.draft_correct), len(self.final_correct)}
        if len(sizes) != 1:
            raise ValueError(f"a pairing's problems and outcomes differ in length: {sorted(sizes)}")

    def to_record(self) -> dict[str, Any]:
        """The pairing as one line of pairings.jsonl."""
        return {
            "drafter": self.drafter.to_record(),
            "challenger": self.challenger.to_record(),
            "problems": list(self.problems),
            "draft_correct": list(self.draft_correct),
            "final_correct": list(self.final_correct),
        }

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Pairing:
        return cls(
            Player.from_record(r["drafter"]),
            Player.from_record(r["challenger"]),
            tuple(r["problems"]),
            tuple(r["draft_correct"]),
            tuple(r["final_correct"]),
        )
