"""``agon/pyfunc-v0``: generated one- and two-line Python functions, checked by asserts in the sandbox.

The code task a small model can solve some of: MBPP, HumanEval and CodeContests are out of
SmolLM2-135M's reach (0 of 40 drafts pass on each, docs/benchmarks.md), so code competition at
CPU scale had no reward to learn from. Each problem asks for one small function from a table of
specs (:data:`~agon_env.envs.tasks.pyfunc_specs.SPECS`, a module of its own), some with a
parameter (``multiples of {k}``), and shows one example call::

    Write a function `largest_even(xs)` that returns the largest even number in the list xs, or
    None if it has none. For example, `largest_even([7, 4, 12, 3])` returns `12`.

The answer is scored like MBPP's (:func:`~agon_env.envs.tasks.code_checks.check_asserts`): the
program runs in the sandbox and ``tests`` hidden asserts call its function (the shown example is
the first of them). Expected values come from the spec's reference solution, run on the host
when the problem is generated (it is the project's own code, never the model's).

**Splits by family of templates, not by function or prompt.** A template is a spec -- a
function's name and code -- with all its constants (``add_k`` with k = 1 … 20); a family is the
templates that behave alike at some constant (``double_all`` is ``scale`` at k = 2, ``add_k`` is
``minus_k`` at −k: :attr:`~agon_env.envs.tasks.pyfunc_specs.Spec.family`, found by
:mod:`~agon_env.envs.tasks.pyfunc_behaviour`). Each level's families are dealt whole to train,
validation and test (:data:`SPLIT_CYCLE`, in the order of a stable hash of their names), and a
split only draws its own, so a held-out score is on functions never trained on under any name
or constant (issue 47: splitting by function left 19 of level 1's 21 test functions with a
training template; issue 58: splitting by name left ``double_all`` and ``add_k`` in level 1's
test split, a third of its problems). A problem draws a template first, then a constant.

**Difficulty knobs.** ``difficulty`` picks the specs' level: 1, a single expression over one
builtin (``s[::-1]``, ``min(xs)``, ``s * 3``); 2, a condition or a comprehension (``largest
even``, ``words longer than 3 letters``); 3, two steps (``second largest distinct``, ``rotate
left by 2``). ``tests`` is how many asserts must pass (more inputs: fewer lucky passes) and
``example=False`` hides the example call. Each level includes the levels below it. Level 1 (the
default) is where ``agon probe`` found SmolLM2-135M in the 20–60 % band the issue asked for
(9/40 = 22 % [11, 38] on validation templates never trained on under any name or constant,
docs/benchmarks.md). Templates
per level (train / validation / test; ``python -m agon_env.envs.tasks.pyfunc`` recounts them and
their functions): 1: 16 / 6 / 8, 2: 25 / 9 / 12, 3: 33 / 12 / 16.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from agon_env.envs.tasks.base import SPLITS, Problem, check_split
from agon_env.envs.tasks.code import CodeTask
from agon_env.envs.tasks.code_checks import CheckReport, check_asserts, strip_code_fence
from agon_env.envs.tasks.pyfunc_specs import LEVELS, SPECS, Args, Spec
from agon_env.sandbox import Limits
from agon_env.seeding import derive_seed


@dataclass(frozen=True)
class Function:
    """One spec with its parameter: the unit the splits partition."""

    spec: Spec
    k: Any

    @property
    def statement(self) -> str:
        return f"Write a function `{self.spec.name}({self.spec.signature})` that " + (
            self.spec.statement.format(k=self.k) + "."
        )

    @property
    def reference(self) -> str:
        body = self.spec.code.format(k=self.k)
        return f"def {self.spec.name}({self.spec.signature}):\n    {body}\n"


@cache
def _compiled(reference: str, name: str) -> Callable[..., object]:
    namespace: dict[str, object] = {}
    exec(reference, namespace)  # the project's own reference (SPECS), never model text
    return namespace[name]


SPLIT_CYCLE = ("train", "train", "train", "validation", "test")
"""How a level's templates are dealt to the splits (60 / 20 / 20 %), in the order of a stable
hash of their names: mechanical, so no one picks which templates are held out, and balanced, so
every split of every level has templates (a hash bucket per template left level 1 with one
validation template)."""


def deal(families: Mapping[str, str]) -> dict[str, str]:
    """Template name -> split, from template name -> family name: each level's families (a
    family's level is its lowest member's), ordered by a stable hash of their names, dealt round
    :data:`SPLIT_CYCLE`; every member goes where its family goes."""
    level = {s.name: s.level for s in SPECS}
    first: dict[str, int] = {}
    for name, fam in families.items():
        first[fam] = min(first.get(fam, level[name]), level[name])
    to: dict[str, str] = {}
    for lv in LEVELS:
        fams = sorted(
            (f for f, f_lv in first.items() if f_lv == lv), key=lambda f: derive_seed(0, "pyfunc", f)
        )
        to.update((f, SPLIT_CYCLE[i % len(SPLIT_CYCLE)]) for i, f in enumerate(fams))
    return {name: to[fam] for name, fam in families.items()}


@cache
def template_splits() -> dict[str, str]:
    """Template (spec) name -> its split: families (:attr:`Spec.kin`) dealt whole by :func:`deal`,
    so a template and all its constants, and every template that behaves as it at some constant,
    are in one split."""
    return deal({s.name: s.kin for s in SPECS})


@cache
def templates(difficulty: int, split: str) -> tuple[Spec, ...]:
    """The templates (specs) of levels 1 to ``difficulty`` in ``split``."""
    return tuple(s for s in SPECS if s.level <= difficulty and template_splits()[s.name] == split)


@cache
def functions(difficulty: int, split: str) -> tuple[Function, ...]:
    """The functions (a template with one of its constants) of levels 1 to ``difficulty`` in ``split``."""
    return tuple(Function(s, k) for s in templates(difficulty, split) for k in s.ks)


def _call(name: str, args: Args) -> str:
    return f"{name}({', '.join(map(repr, args))})"


def make_problem(function: Function, rng: random.Random, tests: int, example: bool, pid: str) -> Problem:
    """One problem: ``tests`` distinct calls of ``function`` with their expected values."""
    ref = _compiled(function.reference, function.spec.name)
    drawn: dict[str, object] = {}
    for _ in range(20 * tests):
        args = function.spec.inputs(rng, function.k)
        drawn.setdefault(_call(function.spec.name, args), ref(*args))
    # Different expected values first, so a constant (``return False``) cannot pass by luck.
    calls: dict[str, object] = {}
    for call, value in drawn.items():
        if len(calls) < tests and repr(value) not in {repr(v) for v in calls.values()}:
            calls[call] = value
    for call, value in drawn.items():
        if len(calls) < tests:
            calls.setdefault(call, value)
    first, expected = next(iter(calls.items()))
    prompt = function.statement + (f" For example, `{first}` returns `{expected!r}`." if example else "")
    return Problem(
        id=pid,
        prompt=prompt,
        answer={
            "setup": "",
            "tests": [f"assert {call} == {value!r}" for call, value in calls.items()],
            "reference": function.reference,
        },
        meta={"function": function.spec.name, "k": function.k, "statement": function.statement},
    )


class PyFuncTask(CodeTask):
    """Generated small functions of one level, scored by their asserts in the sandbox."""

    name = "pyfunc"
    prompt_family = "code-function"

    def __init__(
        self,
        difficulty: int = 1,
        size: int = 2000,
        seed: int = 0,
        split: str = "train",
        tests: int = 4,
        example: bool = True,
        limits: Limits | None = None,
    ) -> None:
        check_split(split)
        if split is None:
            raise ValueError(f"split must be one of {list(SPLITS)}, got None")
        if difficulty not in LEVELS:
            raise ValueError(f"difficulty must be one of {LEVELS}, got {difficulty!r}")
        if size < 1 or not 1 <= tests <= 10:
            raise ValueError(f"size must be positive and tests in 1..10, got size={size}, tests={tests}")
        pool = templates(difficulty, split)
        if not pool:
            raise ValueError(f"level {difficulty} has no template in split {split!r}")
        problems = []
        for i in range(size):
            # A template first, then its constant: a template with 20 constants (add_k) is drawn
            # as often as one with none, so no template fills a split's problems.
            rng = random.Random(derive_seed(seed, "pyfunc", split, difficulty, tests, i))
            spec = rng.choice(pool)
            function = Function(spec, rng.choice(spec.ks))
            problems.append(make_problem(function, rng, tests, example, f"{split}-{i}"))
        super().__init__(problems, limits)
        self.difficulty, self.split, self.tests, self.example = difficulty, split, tests, example
        self.name = f"pyfunc-d{difficulty}"

    def run_checks(
        self, problem: Problem, answer: str, limits: Limits, measuring: bool = False
    ) -> CheckReport:
        return check_asserts(strip_code_fence(answer), problem.answer["tests"], "", limits)


def pyfunc(
    difficulty: int = 1,
    size: int = 2000,
    seed: int = 0,
    split: str = "train",
    tests: int = 4,
    example: bool = True,
) -> PyFuncTask:
    """``agon/pyfunc-v0``."""
    return PyFuncTask(difficulty, size, seed, split, tests, example)


def counts() -> dict[int, dict[str, tuple[int, int]]]:
    """(templates, functions) per level and split."""
    return {lv: {s: (len(templates(lv, s)), len(functions(lv, s))) for s in SPLITS} for lv in LEVELS}


if __name__ == "__main__":
    for lv, row in counts().items():
        print(lv, *(f"{s}: {t} templates / {f} functions" for s, (t, f) in row.items()))
