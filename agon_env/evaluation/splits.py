"""Which problems an evaluation reports on (test), which it may tune on (validation), and
the check that neither overlaps the other or the run's training pool.

Both come from a registered id (any ``agon_env.make``-able task, including
``agon/math-v0`` over a local file with a field mapping). A task that takes ``split``
gives each its own split -- content-disjoint by construction (arith partitions its
expression space, file and hub tasks without official held-out splits carve them by a
hash of the normalised question, see :func:`agon_env.envs.tasks.base.content_split`).
A task without splits gives both from one problem list, as disjoint seeded samples.
Either way the samples hold *distinct* prompts, and :func:`check_heldout` verifies, by
normalised prompt text, that test ∩ validation = ∅ and test ∩ training pool = ∅ before
anything is sampled.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agon_env.envs.tasks.base import Task, normalize_prompt
from agon_env.errors import USER_ERRORS, InputError, UserError, WrongType
from agon_env.evaluation.errors import OverlapError
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.options import ENV_KWARGS
from agon_env.registry import make, spec, with_split
from agon_env.seeding import derive_seed

if TYPE_CHECKING:
    from pettingzoo.utils.wrappers import OrderEnforcingWrapper

HOW_CHECKED = "normalised prompt text (lower-cased, whitespace collapsed), compared as sets"


@dataclass
class Part:
    """The problems of one evaluation part: a task and the indices drawn from it."""

    task: Task
    indices: list[int]

    def ids(self) -> list[str]:
        return [str(self.task[i].id) for i in self.indices]

    def prompts(self) -> list[str]:
        return [normalize_prompt(self.task[i].prompt) for i in self.indices]


@dataclass
class EvalData:
    """The env id, its test and validation parts, and how their disjointness was checked."""

    env_id: str
    test: Part
    validation: Part
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    split: str | None = "test"
    check: JSONRecord = field(default_factory=dict)
    """Filled by :func:`check_heldout`: overlap counts and whether overlap was allowed."""

    def env(
        self, mode: str, part: Part, exchange: str | None = None, options: dict[str, JSONValue] | None = None
    ) -> OrderEnforcingWrapper:
        """A template env in ``mode`` over ``part``'s task (the reward scheme is irrelevant to accuracy),
        with ``exchange`` (the channel) when given and a run's other env keywords (``options``)."""
        chosen = {**(options or {}), **({"exchange": exchange} if exchange else {})}
        return make(self.env_id, task=part.task, mode=mode, **chosen)

    def describe(self) -> JSONRecord:
        return {
            "env": self.env_id,
            "task": getattr(self.test.task, "name", type(self.test.task).__name__),
            "task_kwargs": {k: v for k, v in self.task_kwargs.items() if _jsonable(v)},
            "split": self.split,
            "task_size": len(self.test.task),
            "test_problems": len(self.test.indices),
            "validation_problems": len(self.validation.indices),
            "disjoint": self.check,
        }


def _jsonable(v: object) -> bool:
    return isinstance(v, (str, int, float, bool, type(None)))


def takes_split(env_id: str) -> bool:
    """Whether the task behind ``env_id`` is built per split (``split=`` keyword)."""
    return spec(env_id).takes("split")


def build_task(
    env_id: str,
    task_kwargs: dict[str, Any] | None = None,
    split: str | None = "test",
    keep_split: bool = False,
) -> Task:
    """The task behind ``env_id``, on ``split`` when its constructor takes one.

    ``keep_split`` leaves a ``split`` already in ``task_kwargs`` alone (a run's own training
    split); otherwise ``split`` wins. Env-level keys (``mode``, ``lam``, ...) are dropped:
    evaluation picks the mode per method.
    """
    env_spec = spec(env_id)
    kwargs = {k: v for k, v in {**env_spec.kwargs, **(task_kwargs or {})}.items() if k not in ENV_KWARGS}
    if split is not None and not keep_split:
        kwargs.pop("split", None)
    try:
        task = env_spec.load()(**with_split(env_id, kwargs, split))
    except USER_ERRORS as exc:  # a task's constructor refusing a keyword: the user's, not a defect
        if isinstance(exc, UserError):
            raise
        raise InputError(f"env {env_id} with kwargs {kwargs}: {exc}") from exc
    if not (hasattr(task, "score") and hasattr(task, "__getitem__") and hasattr(task, "__len__")):
        raise WrongType(f"{env_id} builds a {type(task).__name__}, not a task; agon eval needs a task id")
    return task


def distinct_sample(
    task: Task, n: int, seed: int, key: str, exclude: frozenset[str] | set[str] = frozenset()
) -> list[int]:
    """Up to ``n`` sorted indices of ``task`` with distinct normalised prompts, none in ``exclude``."""
    order = list(range(len(task)))
    random.Random(derive_seed(seed, "eval-problems", key)).shuffle(order)
    seen, out = set(exclude), []
    for i in order:
        prompt = normalize_prompt(task[i].prompt)
        if prompt not in seen:
            seen.add(prompt)
            out.append(i)
            if len(out) == n:
                break
    return sorted(out)


def load_eval_data(
    env_id: str,
    task_kwargs: dict[str, Any] | None = None,
    split: str | None = "test",
    problems: int = 100,
    val_problems: int = 50,
    seed: int = 0,
) -> EvalData:
    """Test problems from ``split`` and validation problems from ``validation`` (or, for a
    task without splits, both from its one list), each a seeded sample of distinct prompts."""
    if problems < 1:
        raise InputError(f"need at least one test problem, got {problems}")
    if val_problems < 0:
        raise InputError(f"validation problems must be >= 0, got {val_problems}")
    test_task = build_task(env_id, task_kwargs, split)
    per_split = split is not None and takes_split(env_id)
    val_task = build_task(env_id, task_kwargs, "validation") if per_split and val_problems else test_task
    test = distinct_sample(test_task, problems, seed, "test")
    taken: set[str] = (
        set() if val_task is not test_task else {normalize_prompt(test_task[i].prompt) for i in test}
    )
    val = distinct_sample(val_task, val_problems, seed, "validation", exclude=taken) if val_problems else []
    kwargs = dict(task_kwargs or {})
    return EvalData(env_id, Part(test_task, test), Part(val_task, val), kwargs, split)


def check_heldout(
    data: EvalData,
    training_pools: Sequence[tuple[str, Task]] = (),
    allow_overlap: bool = False,
    override: str | None = "--allow-overlap",
) -> JSONRecord:
    """Verify test ∩ validation = ∅ and that neither test nor validation meets any run's
    training pool, by normalised prompt.

    Validation counts too: the cascade direction is picked on it, and a pick made on
    problems the adapters trained on favours the one that memorised more.

    Raises :class:`OverlapError` with the count, an example and the fix (naming the command's
    ``override`` flag, if it has one) unless ``allow_overlap``;
    either way records what it found in ``data.check`` (the report prints it):
    ``test_and_validation`` (a count), ``test_and_training`` and ``validation_and_training``
    (counts per pool label).
    """
    parts = {
        name: dict(zip(part.prompts(), (part.task[i].prompt for i in part.indices), strict=True))
        for name, part in (("test", data.test), ("validation", data.validation))
    }
    test = parts["test"]
    problems: list[str] = []
    found: JSONRecord = {"how": HOW_CHECKED, "allowed_overlap": allow_overlap}
    shared = set(test) & set(parts["validation"])
    found["test_and_validation"] = len(shared)
    if shared:
        example = test[sorted(shared)[0]]
        problems.append(
            f"{len(shared)} of {len(test)} test prompts are also validation prompts (e.g. {example!r})"
        )
    found["test_and_training"], found["validation_and_training"] = {}, {}
    for label, pool in training_pools:
        seen = {normalize_prompt(pool[i].prompt) for i in range(len(pool))}
        for name, prompts in parts.items():
            shared = set(prompts) & seen
            found[f"{name}_and_training"][label] = len(shared)
            if shared:
                example = prompts[sorted(shared)[0]]
                problems.append(
                    f"{len(shared)} of {len(prompts)} {name} prompts occur in the training pool of {label} "
                    f"(e.g. {example!r})"
                )
    data.check = found
    if problems and not allow_overlap:
        anyway = f" or pass {override}" if override else ""
        if takes_split(data.env_id):
            fix = f"evaluate on held-out problems (--split test){anyway}"
        else:  # --split cannot help: the task has one list, which the run trained on
            fix = (
                f"{data.env_id} takes no split=, so its problems are the training pool's: give its "
                "constructor a split= argument (agon_env.envs.tasks.base.carve splits by content, "
                f"docs/envs.md){anyway + ' to report on trained-on problems' if override else ''}"
            )
        raise OverlapError("; ".join(problems) + ": " + fix)
    return found


def overlap_count(check: JSONRecord) -> int:
    """Prompts found in two parts that must be disjoint, over every check :func:`check_heldout` made."""
    by_run = [
        *(check.get("test_and_training") or {}).values(),
        *(check.get("validation_and_training") or {}).values(),
    ]
    return int(check.get("test_and_validation", 0)) + sum(by_run)


def training_pool(env_id: str, kwargs: dict[str, Any]) -> Task:
    """The problems a run trained on: its task on the ``train`` split, as ``agon train`` built it."""
    return build_task(env_id, kwargs, "train", keep_split=True)
