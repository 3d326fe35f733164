"""A plan's ``grid:``: ``TrainConfig`` keys each with a list of values, crossed with every arm.

    arms: {grpo: {algo: grpo}, agon: {algo: agon}}
    grid: {optim.lr: [1e-4, 3e-4], env.exchange: [full, none]}
    comparisons: [agon - grpo]

expands to eight arms named from their values, ``agon@lr=1e-4,exchange=full`` and so on (a key
is named by its last part unless two grid keys share it), each the arm's overrides with the grid
point on top; a comparison of two plain arms becomes one per grid point (``agon@lr=1e-4,... -
grpo@lr=1e-4,...``), while one that already names expanded arms is kept as written. The expansion
happens when the plan is read (:func:`expand` on its mapping, before any key is checked), so
``--print-plan`` shows it, the plan stored in a study folder is the expanded one, and a
registration's hash covers every expanded arm. A plan without ``grid:`` reads as before (its hash
is unchanged).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from agon_env.config import ConfigError, TrainConfig
from agon_env.json_value import JSONRecord, JSONValue

UNSAFE = re.compile(r"[^A-Za-z0-9._+\-]")
"""What a value may not carry into an arm's name (it names folders and logs): replaced by ``_``."""


def label(value: JSONValue) -> str:
    """A grid value as an arm's name spells it: ``1e-4``, ``0.0003``, ``true``, ``none``."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return UNSAFE.sub("_", text)


def _check(grid: JSONValue) -> dict[str, list[JSONValue]]:
    """The grid mapping, refused in one line when a key is no ``TrainConfig`` key or has no values."""
    from agon_env.config import compose

    if not isinstance(grid, dict) or not grid:
        raise ConfigError(f"grid: expected a mapping of TrainConfig keys to lists of values, got {grid!r}")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"grid.{key}: give a non-empty list of values, e.g. [1e-4, 3e-4]")
        if key in ("algo", "seed", "out_dir"):
            raise ConfigError(f"grid.{key}: an arm's plugin, seed and folder are not grid keys")
        _once(key, values, compose)
    return grid


def _once(key: str, values: list[JSONValue], compose: Callable[..., TrainConfig]) -> None:
    """Refuse two values of ``key`` that parse to one config (``"1e-4"`` and ``0.0001``): they would
    be two arms of identical units, and two primary comparisons that are one. Each value is resolved
    as a unit resolves it, so an unknown key or a value of the wrong type is one line here too."""
    from agon_env.config import to_dict

    seen: JSONRecord = {}
    for value in values:
        parsed = repr(to_dict(compose(None, {key: value})))
        if parsed in seen:
            raise ConfigError(
                f"grid.{key}: {seen[parsed]!r} and {value!r} are one value once parsed; give each value once"
            )
        seen[parsed] = value


def names(grid: dict[str, list[JSONValue]]) -> dict[str, str]:
    """Each grid key's name in an arm's name: its last part, unless two keys share it."""
    last = [k.rsplit(".", 1)[-1] for k in grid]
    return {k: short if last.count(short) == 1 else k for k, short in zip(grid, last, strict=True)}


def points(grid: dict[str, list[JSONValue]]) -> list[tuple[str, JSONRecord]]:
    """Every grid point, in the grid's order: its suffix (``lr=1e-4,exchange=full``) and overrides."""
    short = names(grid)
    out = []
    for combo in itertools.product(*grid.values()):
        point = dict(zip(grid, combo, strict=True))
        out.append((",".join(f"{short[k]}={label(v)}" for k, v in point.items()), point))
    return out


def expand(data: JSONRecord, split: Callable[[str], tuple[str, str]]) -> JSONRecord:
    """The plan mapping ``data`` with its ``grid`` crossed into its arms and comparisons (``data``
    itself when it has no grid); ``split`` reads a comparison (the plan's, handed in so that this
    module imports no plan)."""
    if "grid" not in data:
        return data
    data = dict(data)
    grid = _check(data.pop("grid"))
    arms = data.get("arms") or {}
    if not isinstance(arms, dict) or not arms:
        raise ConfigError("grid: the plan needs arms to cross it with, e.g. arms: {agon: {algo: agon}}")
    grown: JSONRecord = {}
    for arm, overrides in arms.items():
        if not isinstance(overrides, dict):
            raise ConfigError(f"arm {arm!r}: expected a mapping of TrainConfig keys, e.g. {{algo: agon}}")
        both = [k for k in grid if k in overrides]
        if both:
            raise ConfigError(f"arm {arm!r} sets {both[0]} itself and the grid varies it; keep one")
        for suffix, point in points(grid):
            name = f"{arm}@{suffix}"
            if name in grown:
                raise ConfigError(f"grid: two values name one arm {name!r}; give distinct values")
            grown[name] = {**overrides, **point}
    data["arms"] = grown
    suffixes = [s for s, _ in points(grid)]
    for which in ("comparisons", "exploratory"):
        data[which] = [c for given in data.get(which) or [] for c in _crossed(split(given), arms, suffixes)]
    return data


def _crossed(pair: tuple[str, str], arms: JSONRecord, suffixes: list[str]) -> list[str]:
    """A comparison of two plain arms, once per grid point; any other comparison as written."""
    first, second = pair
    if first in arms and second in arms:
        return [f"{first}@{s} - {second}@{s}" for s in suffixes]
    return [f"{first} - {second}"]
