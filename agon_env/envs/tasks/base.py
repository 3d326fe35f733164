"""The task protocol: what the draft-and-challenge env needs to know about a problem set.

A *task* is an indexable collection of :class:`Problem` objects plus a pure-ish
``score(problem, answer) -> bool`` that decides correctness of the text found inside
an ``<answer>`` block. The env knows nothing else about tasks, so math, code and any
user task plug in the same way (see ``docs/envs.md``).

Tasks never import a model. Only code tasks touch the sandbox.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agon_env.errors import InputError
from agon_env.json_value import JSONRecord
from agon_env.seeding import derive_seed

SPLITS = ("train", "validation", "test")
"""Every task's splits. No normalised prompt occurs in two of them (see :func:`content_split`)."""
_BUCKETS = 10
_HELDOUT = {0: "test", 1: "test", 2: "validation"}
"""Buckets of :func:`content_split`: 20 % test, 10 % validation, the rest train."""


def normalize_prompt(text: str) -> str:
    """The form prompts are compared in: case and whitespace do not make a new problem."""
    return " ".join(str(text).lower().split())


def content_split(prompt: str) -> str:
    """The split a prompt belongs to, from a stable hash of its normalised text.

    Tasks without official held-out splits carve them with this, so a problem's split is
    a property of its content: the same question can never be in train and in test,
    however many times (or under whatever id) the source repeats it.
    """
    bucket = derive_seed(0, "content-split", normalize_prompt(prompt)) % _BUCKETS
    return _HELDOUT.get(bucket, "train")


def check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise InputError(f"split must be one of {list(SPLITS)} (or None for every problem), got {split!r}")


SPLIT_NEEDS = {"train": 1, "validation": 1, "test": 10}
"""What each split needs at least: training draws from ``train``; ``agon eval`` picks cascade
directions on ``validation``; the end-of-run held-out check says nothing on fewer than 10 ``test``
problems (:data:`agon_env.algorithms.run.MIN_HELDOUT`). At :func:`content_split`'s 70 / 10 / 20 %
that is about 50 distinct problems in all."""


def carve(problems: Iterable[Problem], split: str | None) -> list[Problem]:
    """The problems of ``split`` by :func:`content_split`; ``None`` keeps them all.

    An empty split is refused and a 1-problem split warned about, naming the split, how many
    problems each split got and how many each needs (:data:`SPLIT_NEEDS`): a handful of problems
    puts them all in ``train`` by chance, and the error would otherwise surface later as "a task
    needs at least one problem" with no word of which split was empty.
    """
    check_split(split)
    problems = list(problems)
    chosen = [p for p in problems if split is None or content_split(p.prompt) == split]
    if split is not None and len(chosen) < 2:
        got = {s: sum(content_split(p.prompt) == s for p in problems) for s in SPLITS}
        text = (
            f"carve: split {split!r} has {len(chosen)} of {len(problems)} problems (train / validation / "
            f"test: {got['train']} / {got['validation']} / {got['test']}); content_split sends about "
            f"70 / 10 / 20 % of problems to them by a hash of their text, and training needs at least "
            f"{SPLIT_NEEDS['train']} train problem, agon eval {SPLIT_NEEDS['validation']} validation "
            f"problem, the held-out check {SPLIT_NEEDS['test']} test problems: give about 50 problems or more"
        )
        if not chosen:
            raise ValueError(text)
        warnings.warn(text, stacklevel=2)
    return chosen


def shared_prompts(pool: Task, heldout: Task) -> list[str]:
    """The prompts of ``heldout`` (as it writes them, sorted) that ``pool`` also holds,
    compared as normalised text: the check that a training pool keeps out of a test split."""
    held: dict[str, str] = {}
    for i in range(len(heldout)):
        held.setdefault(normalize_prompt(heldout[i].prompt), heldout[i].prompt)
    seen = {normalize_prompt(pool[i].prompt) for i in range(len(pool))}
    return sorted(held[p] for p in seen & set(held))


@dataclass(frozen=True)
class Problem:
    """One problem as the env shows it.

    ``prompt`` is the exact text an agent reads; ``answer`` is whatever ``Task.score``
    needs (a gold string for math, a test bundle for code). ``answer`` never reaches
    an observation.
    """

    id: str
    prompt: str
    answer: Any
    meta: JSONRecord = field(default_factory=dict)


@runtime_checkable
class Task(Protocol):
    """What every task provides. ``name`` is shown in infos and logs."""

    name: str
    """Shown in infos and logs. A task may also set ``prompt_family`` (``arithmetic``,
    ``math``, ``code-function``, ``code-stdio`` or one it registers): the worked examples
    and format instructions agents use on it (``agon_env.agents.prompt_families``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Problem: ...

    def score(self, problem: Problem, answer: str) -> bool:
        """True when ``answer`` (the text inside ``<answer>``) solves ``problem``.

        Must return a bool in bounded time and never raise on arbitrary model text. A verifier
        that cannot judge raises :class:`~agon_env.envs.tasks.errors.VerifierError` (or
        ``VerifierTimeout``) instead of returning False: the env scores it 0 and counts it.
        A call that does not return within the task's ``score_timeout`` seconds (an optional
        attribute; default :data:`agon_env.envs.scoring.SCORE_TIMEOUT_S`, None = no limit) is
        abandoned and counted as a timeout (:mod:`agon_env.envs.scoring` says what that covers).
        """
        ...


class ListTask:
    """A task over an in-memory list of problems with a pluggable scorer.

    Subclasses (or callers) supply ``score``; this class only owns storage and indexing.
    """

    name: str = "list"

    def __init__(self, problems: Sequence[Problem], name: str | None = None) -> None:
        if len(problems) == 0:
            raise ValueError(
                "a task needs at least one problem; got an empty list (an empty split? "
                "agon_env.envs.tasks.base.carve says how many problems each split needs)"
            )
        self.problems = list(problems)
        if name is not None:
            self.name = name

    def __len__(self) -> int:
        return len(self.problems)

    def __getitem__(self, index: int) -> Problem:
        return self.problems[index]

    def score(self, problem: Problem, answer: str) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def split(self, fraction: float, seed: int = 0) -> tuple[ListTask, ListTask]:
        """Deterministic (train, held-out) split; used by eval to pick directions on validation."""
        import random

        from agon_env.seeding import derive_seed

        idx = list(range(len(self.problems)))
        random.Random(derive_seed(seed, "task-split")).shuffle(idx)
        cut = max(1, min(len(idx) - 1, round(len(idx) * fraction)))
        first, second = (
            self._subset([self.problems[i] for i in sorted(part)]) for part in (idx[:cut], idx[cut:])
        )
        return first, second

    def _subset(self, problems: list[Problem]) -> ListTask:
        import copy

        clone = copy.copy(self)
        clone.problems = problems
        return clone
