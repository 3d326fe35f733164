"""Choosing the cascade direction on a validation split, never on test.

The paper ran both cascade directions (A drafts → B answers, and B → A) on its test set
and reported the better one. Picking the maximum of two noisy test accuracies biases the
reported number upwards. Here the direction is a *decision* made from validation
results only; test results are looked up afterwards for the chosen direction.

The rule, in order:

1. higher validation pass@1;
2. on a tie, the shorter mean trace (cheaper at the same accuracy);
3. on a further tie, the first direction in the order given (deterministic).

:func:`select_then_report` is the only path the evaluator uses: it refuses validation
and test sets that share a problem id, and it records which direction test would have
picked, so a report can show when the post-hoc choice would have differed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from agon_env.evaluation.errors import SelectionLeakError
from agon_env.json_value import JSONRecord
from agon_env.stats import Rate

RULE = "max validation pass@1; ties -> shorter mean trace -> first listed"
T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    """One direction's validation evidence."""

    accuracy: Rate
    mean_tokens: float | None = None


@dataclass(frozen=True)
class DirectionChoice:
    chosen: str
    validation: dict[str, JSONRecord]
    rule: str = RULE
    test_oracle: str | None = None
    """The direction test accuracy alone would have picked (for transparency only)."""
    extra: JSONRecord = field(default_factory=dict)

    @property
    def post_hoc_differs(self) -> bool | None:
        return None if self.test_oracle is None else self.test_oracle != self.chosen

    def to_dict(self) -> JSONRecord:
        return {
            "chosen": self.chosen,
            "rule": self.rule,
            "validation": self.validation,
            "test_oracle": self.test_oracle,
            "post_hoc_differs": self.post_hoc_differs,
            **self.extra,
        }


def _key(order: int, cand: Candidate) -> tuple[float, float, int]:
    acc = cand.accuracy.rate
    tokens = cand.mean_tokens if cand.mean_tokens is not None else float("inf")
    # Sort ascending: negate what should be large.
    return (-(acc if acc is not None else -1.0), tokens, order)


def choose_direction(candidates: Mapping[str, Candidate]) -> str:
    """The direction the rule picks from ``candidates`` (validation evidence only)."""
    if not candidates:
        raise ValueError("no cascade directions to choose from")
    ranked = sorted(enumerate(candidates.items()), key=lambda item: _key(item[0], item[1][1]))
    return ranked[0][1][0]


def check_disjoint(validation_ids: Collection[str], test_ids: Collection[str]) -> None:
    """Raise :class:`SelectionLeakError` when a problem id is in both splits."""
    shared = set(validation_ids) & set(test_ids)
    if shared:
        sample = ", ".join(sorted(shared)[:5])
        raise SelectionLeakError(
            f"{len(shared)} problem id(s) are in both the validation and the test split (e.g. {sample}); "
            "the cascade direction must be chosen on problems that are not reported"
        )


def select_then_report(
    validation: Mapping[str, Candidate],
    test: Mapping[str, T],
    validation_ids: Collection[str],
    test_ids: Collection[str],
    test_candidates: Mapping[str, Candidate] | None = None,
) -> tuple[DirectionChoice, T]:
    """Choose on ``validation``, then return the choice and ``test[choice]``.

    ``test_candidates`` (optional) only fills :attr:`DirectionChoice.test_oracle`; it
    never influences the choice.
    """
    check_disjoint(validation_ids, test_ids)
    missing = set(validation) - set(test)
    if missing:
        raise KeyError(f"directions {sorted(missing)} were validated but have no test result")
    chosen = choose_direction(validation)
    oracle = choose_direction(test_candidates) if test_candidates else None
    record = {d: {**c.accuracy.to_dict(), "mean_tokens": c.mean_tokens} for d, c in validation.items()}
    choice = DirectionChoice(
        chosen=chosen,
        validation=record,
        test_oracle=oracle,
        extra={"validation_problems": len(set(validation_ids))},
    )
    return choice, test[chosen]
