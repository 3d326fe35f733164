"""Whether ``agon/pyfunc-v0``'s held-out functions are trained functions under another name.

The splits are dealt by template (:mod:`agon_env.envs.tasks.pyfunc`), and a name says nothing
about behaviour: until issue 58 the held-out ``double_all`` (``[x * 2 for x in xs]``) was the
training template ``scale`` at k = 2, and the validation ``words_of_length`` at k = 5 returned
what the training ``long_words`` at k = 4 returns on every sentence the generator draws (its
words have at most five letters). A held-out score on such a function measures a trained
function with an untrained constant, not a new function.

So the check is by behaviour. A held-out *function* (a template at one of the constants its
problems draw, :attr:`Spec.ks`) *clashes* with a template of another split when that template,
at **any** constant of its kind (:func:`constants`: every integer in −100 … 100, every
one-character string and ``""``, not only the ones its own problems draw), returns what the
held-out function returns on every one of :data:`SAMPLES` inputs drawn the way its problems
draw them -- compared with ``==``, as the hidden asserts compare. Templates that coincide at
some constant are one :attr:`Spec.family`, and families are dealt whole to the splits, so no
level has a clash (``tests/envs/test_pyfunc_behaviour.py``).

``python -m agon_env.envs.tasks.pyfunc_behaviour`` prints, per level and split, the templates and
functions, and the share of problems that are a trained function (:func:`trained_share`) under
the deal by template name (before issue 58) and by family (now), then one JSON line.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from agon_env.envs.tasks.base import SPLITS
from agon_env.envs.tasks.pyfunc import Function, _compiled, deal, template_splits
from agon_env.envs.tasks.pyfunc_specs import LEVELS, SPECS, Args, Spec
from agon_env.seeding import derive_seed

SAMPLES = 200
"""Inputs drawn per held-out function: the problems' own draw, so a coincidence on all of them
is a coincidence on what the hidden asserts call (4 of these per problem)."""

INT_CONSTANTS = tuple(range(-100, 101))
"""Every integer constant an integer template is tried at: wide enough for ``add_k`` at −k
(``minus_k``), ``count_greater`` below every drawn number (``count_items``) and ``above`` past
every one."""

CHAR_CONSTANTS = ("", *string.ascii_letters, *string.digits, *string.punctuation, " ")
"""Every string constant a string template is tried at (``join_with`` at ``""`` is
``no_spaces``)."""


def constants(spec: Spec) -> tuple[Any, ...]:
    """Every constant ``spec`` is compared at: its own, and all of their kind (``None``: none)."""
    kinds = {type(k) for k in spec.ks}
    extra = INT_CONSTANTS if kinds == {int} else CHAR_CONSTANTS if kinds == {str} else ()
    return tuple(dict.fromkeys((*spec.ks, *extra)))


def reference(function: Function) -> Callable[..., object]:
    return _compiled(function.reference, function.spec.name)


def same_behaviour(f: Callable[..., object], g: Callable[..., object], inputs: Iterable[Args]) -> bool:
    """Whether ``g`` returns what ``f`` returns (by ``==``, as the asserts compare) on every input;
    ``g`` raising where ``f`` returns is a difference."""
    for args in inputs:
        try:
            if g(*args) != f(*args):
                return False
        except Exception:  # another template on foreign input: any error is a difference
            return False
    return True


@cache
def drawn_inputs(name: str, k: Any, n: int = SAMPLES) -> tuple[Args, ...]:
    """``n`` inputs drawn for ``name`` at ``k`` the way its problems draw them (seeded)."""
    spec = _by_name()[name]
    rng = random.Random(derive_seed(0, "pyfunc-behaviour", name, repr(k)))
    return tuple(spec.inputs(rng, k) for _ in range(n))


@cache
def _by_name() -> dict[str, Spec]:
    return {s.name: s for s in SPECS}


@dataclass(frozen=True)
class Coincidence:
    """``held`` at ``held_k`` (a constant its problems draw) behaves as ``other`` at ``other_k``."""

    held: str
    held_k: Any
    other: str
    other_k: Any

    def __str__(self) -> str:
        return f"{self.held}(k={self.held_k!r}) = {self.other}(k={self.other_k!r})"


@cache
def coincidences() -> tuple[Coincidence, ...]:
    """Every (function, other template at some constant) pair of :data:`SPECS` that behave alike."""
    found = []
    for a in SPECS:
        for ka in a.ks:
            f = reference(Function(a, ka))
            inputs = drawn_inputs(a.name, ka)
            for b in SPECS:
                if b.name == a.name:
                    continue
                for kb in constants(b):
                    if same_behaviour(f, reference(Function(b, kb)), inputs):
                        found.append(Coincidence(a.name, ka, b.name, kb))
                        break  # one constant is enough to make b a trained twin
    return tuple(found)


def clashes(level: int, splits: Mapping[str, str], split: str) -> list[Coincidence]:
    """``split``'s functions at ``level`` (levels 1 to ``level``) that are a template of
    another split (training or held-out) at some constant."""
    names = {s.name for s in SPECS if s.level <= level}
    return [
        c
        for c in coincidences()
        if {c.held, c.other} <= names and splits[c.held] == split and splits[c.other] != split
    ]


def trained_share(level: int, splits: Mapping[str, str], split: str) -> float:
    """The share of ``split``'s problems at ``level`` that are a training function at some
    constant: a problem draws a template, then one of its constants, uniformly (as
    :class:`~agon_env.envs.tasks.pyfunc.PyFuncTask` does)."""
    pool = [s for s in SPECS if s.level <= level and splits[s.name] == split]
    if split == "train" or not pool:
        return 0.0
    trained = {s.name for s in SPECS if s.level <= level and splits[s.name] == "train"}
    hit = {(c.held, c.held_k) for c in coincidences() if c.other in trained}
    return sum(sum((s.name, k) in hit for k in s.ks) / len(s.ks) for s in pool) / len(pool)


def families() -> list[set[str]]:
    """The templates that coincide at some constant, joined (connected components of
    :func:`coincidences`): what :attr:`Spec.family` must group, no more, no less."""
    parent = {s.name: s.name for s in SPECS}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for c in coincidences():
        parent[root(c.held)] = root(c.other)
    groups: dict[str, set[str]] = {}
    for name in parent:
        groups.setdefault(root(name), set()).add(name)
    return sorted(groups.values(), key=lambda g: sorted(g))


def _summary(found: list[Coincidence]) -> list[str]:
    """``held = other (n of m k)`` per pair of templates, for the table."""
    pairs: dict[tuple[str, str], set[Any]] = {}
    for c in found:
        pairs.setdefault((c.held, c.other), set()).add(c.held_k)
    ks = {s.name: len(s.ks) for s in SPECS}
    return [f"{h} = {o} ({len(k)} of {ks[h]} k)" for (h, o), k in sorted(pairs.items())]


def by_name() -> dict[str, str]:
    """The deal before issue 58: each template its own family (dealt by its name's hash)."""
    return deal({s.name: s.name for s in SPECS})


def table(splits: Mapping[str, str]) -> dict[int, dict[str, dict[str, Any]]]:
    """Per level and split: templates, functions, trained shares and the clashes by name."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for lv in LEVELS:
        out[lv] = {}
        for sp in SPLITS:
            pool = [s for s in SPECS if s.level <= lv and splits[s.name] == sp]
            out[lv][sp] = {
                "templates": len(pool),
                "functions": sum(len(s.ks) for s in pool),
                "trained_share": round(trained_share(lv, splits, sp), 4),
                "clashes": _summary(clashes(lv, splits, sp)),
            }
    return out


def _print(label: str, rows: dict[int, dict[str, dict[str, Any]]]) -> None:
    print(f"{label}: level, split, templates, functions, trained share, clashes with another split")
    for lv, by_split in rows.items():
        for sp, r in by_split.items():
            share, clashed = f"{100 * r['trained_share']:.1f} %", "; ".join(r["clashes"])
            print(f"  {lv} {sp:<10} {r['templates']:>3} {r['functions']:>4} {share:>7}  {clashed}")


if __name__ == "__main__":
    before, after = table(by_name()), table(template_splits())
    print("families (templates that coincide at some constant):")
    for group in families():
        if len(group) > 1:
            print("  ", ", ".join(sorted(group)))
    _print("before (by template name)", before)
    _print("after (by family)", after)
    worst = max(r["trained_share"] for by_split in after.values() for r in by_split.values())
    print(json.dumps({"bench": "pyfunc_behaviour", "before": before, "after": after, "worst_after": worst}))
