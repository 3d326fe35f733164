"""Env registry in the spirit of Gymnasium's ``register`` / ``make`` / ``EnvSpec``.

An id maps to a string entry point plus default kwargs. The entry point builds either

* a **task** (anything with ``__len__``, ``__getitem__`` and ``score``): ``make`` wraps it
  in the env class registered with :func:`register_task_env` (the draft-and-challenge env,
  which ``agon_env.envs.registrations`` registers), routing that env's keywords
  (its ``keywords()``) to the env and everything else to the task; or
* a whole ``pettingzoo.AECEnv`` subclass, which gets every kwarg. (A factory function is
  called with the task kwargs only; if it returns an ``AECEnv`` that env is used as is,
  so register the class itself when env keywords must reach it.)

Whatever the entry point builds, ``make`` returns it inside PettingZoo's
``OrderEnforcingWrapper`` (stepping or observing before ``reset`` raises) with
``env.unwrapped.spec`` set to the :class:`EnvSpec` it came from, as Gymnasium's ``make``
does; the wrapper forwards every other attribute (``env.task``, ``env.spawn()``, ``env.spec``).

Registering a task takes one call::

    agon_env.register("me/primes-v0", entry_point="my_pkg.tasks:PrimeTask", kwargs={"n": 100})
    env = agon_env.make("me/primes-v0", exchange="none")

Two ways to find an id without importing its module by hand, as Gymnasium and rLLM users expect:

* ``"my_pkg.tasks:me/primes-v0"`` -- any id written ``module:id`` (``make``, ``spec``, every
  ``--env`` flag, a config file's ``env.id``) imports ``module`` first, as Gymnasium's
  ``make("module:Env-v0")`` does, then looks ``id`` up.
* An installed package that declares ``me/primes-v0 = "my_pkg.tasks:PrimeTask"`` under the
  :data:`ENTRY_POINT_GROUP` entry-point group is registered lazily: its id is listed and made
  like a built-in one, and its module is imported only when the id is made. An id the package
  also registers in code takes that registration (its kwargs and description) instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import numbers
import os
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from agon_env.config import import_user_modules as import_modules
from agon_env.errors import (
    EntryPointError,
    NotInstalled,
    UnknownKeywordError,
    UnknownName,
    WrongType,
    close_matches,
    unknown_id_message,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "EnvSpec",
    "all_specs",
    "import_modules",
    "make",
    "register",
    "register_task_env",
    "registered_ids",
    "spec",
    "with_split",
]


@dataclass(frozen=True)
class EnvSpec:
    """One registered id."""

    id: str
    entry_point: str | Callable[..., object]
    """``"module.path:attr"`` (imported on ``make``) or a callable."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Defaults; ``make(id, **overrides)`` overrides them key by key."""
    description: str = ""
    offline: bool = True
    """Whether ``make(id)`` can work without network (used by the conformance suite)."""
    data: tuple[str, ...] = ()
    """Files it reads from the offline data folder (``$AGON_DATA_DIR``) when there is no hub
    (:func:`agon_env.envs.tasks.data.offline_status` says whether they are here)."""

    def load(self) -> Callable[..., object]:
        if callable(self.entry_point):
            return self.entry_point
        module, _, attr = self.entry_point.partition(":")
        if not attr:
            raise ValueError(f"entry point {self.entry_point!r} of {self.id!r} must look like 'module:attr'")
        try:
            obj: object = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise EntryPointError(
                f"env id {self.id!r}: its entry point {self.entry_point!r} cannot be loaded ({exc}); "
                "is the package that declares it installed and importable?"
            ) from None
        return obj

    def missing_module(self) -> str | None:
        """The entry point's module when it cannot be found (without importing it), else None."""
        if callable(self.entry_point):
            return None
        module = self.entry_point.partition(":")[0]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # a parent package is missing
            found = None
        return None if found is not None else module

    def takes(self, keyword: str) -> bool:
        """Whether the entry point accepts ``keyword`` (e.g. ``split``: a task built per split)."""
        try:
            params = inspect.signature(self.load()).parameters
        except (TypeError, ValueError):
            return False
        return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


_REGISTRY: dict[str, EnvSpec] = {}

ENTRY_POINT_GROUP = "agon_env.tasks"
"""The entry-point group installed packages declare tasks under: ``"me/task-v0" = "module:attr"``,
the attr being what :func:`register`'s ``entry_point`` takes (docs/envs.md)."""

_FROM_ENTRY_POINTS: set[str] = set()
"""Ids registered from entry points, which a registration in code may replace."""
_SCANNED: list[bool] = []
"""Non-empty once the installed entry points have been registered (once per process)."""


def register(
    id: str,
    entry_point: str | Callable[..., object],
    kwargs: dict[str, Any] | None = None,
    description: str = "",
    offline: bool = True,
    data: tuple[str, ...] = (),
) -> EnvSpec:
    """Add an id; re-registering an existing id is an error (ids are versioned instead), except
    over an id declared as an entry point: the package's own registration says more."""
    if id in _REGISTRY and id not in _FROM_ENTRY_POINTS:
        raise ValueError(f"env id {id!r} is already registered; bump its version (e.g. -v1) instead")
    _FROM_ENTRY_POINTS.discard(id)
    spec = EnvSpec(id, entry_point, dict(kwargs or {}), description, offline, tuple(data))
    _REGISTRY[id] = spec
    return spec


def _register_entry_points() -> None:
    """Register the ids installed packages declare under :data:`ENTRY_POINT_GROUP`, once; an id
    already registered in code keeps that registration."""
    if _SCANNED:
        return
    _SCANNED.append(True)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        dist = getattr(ep.dist, "name", None) or "an installed package"
        register(ep.name, ep.value, description=f"{ep.value} (entry point of {dist})")
        _FROM_ENTRY_POINTS.add(ep.name)


def resolve_id(id: str) -> str:
    """The registry id of ``id``: ``"module:me/task-v0"`` imports ``module`` and is
    ``"me/task-v0"``; a plain id is itself."""
    module, sep, name = id.partition(":")
    if not sep:
        return id
    if not module or not name:
        raise UnknownName(f"env id {id!r}: write it as an id or as module:id, e.g. my_pkg.tasks:me/task-v0")
    try:
        import_modules([module])
    except ImportError as exc:
        raise NotInstalled(
            f"env id {id!r}: cannot import {module!r} ({exc}); is it installed or on PYTHONPATH?"
        ) from None
    return name


_TASK_ENV: list[type[AECEnv]] = []
"""The env class a task is wrapped in (one at most; :func:`register_task_env` sets it)."""


def register_task_env(env_class: type[AECEnv]) -> None:
    """Wrap every task ``make`` builds in ``env_class``: an ``AECEnv`` subclass built as
    ``env_class(task, **keywords)``, whose ``keywords()`` names the keywords it takes.

    The env registers itself (``agon_env.envs.registrations``), so this module imports no env.
    """
    _TASK_ENV[:] = [env_class]


def task_env() -> type[AECEnv]:
    """The env class tasks are wrapped in."""
    if not _TASK_ENV:
        raise RuntimeError(
            "no env class wraps tasks: import agon_env (it registers the draft-and-challenge env)"
        )
    return _TASK_ENV[0]


def _check_keywords(
    id: str, entry: Callable[..., object], given: Iterable[str], env_keywords: Iterable[str] = ()
) -> None:
    """Refuse, naming the close matches, keywords ``entry`` does not take (one that takes
    ``**kwargs`` takes any): ``dificulty=3`` is a typo of ``difficulty``, not a bare TypeError."""
    try:
        params = inspect.signature(entry).parameters
    except (TypeError, ValueError):  # a builtin or C callable: let the call say what it takes
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = [k for k in given if k not in params]
    if not unknown:
        return
    if "max_cycles" in unknown:  # PettingZoo's max_cycles_test passes it to every env
        raise UnknownKeywordError(
            f"make({id!r}): this env has a fixed two-turn episode (a draft, then a challenge), so it "
            "takes no max_cycles; PettingZoo's max_cycles_test does not apply to it"
        )
    taken = sorted(k for k in params if k not in ("self", "task"))
    known = sorted(set(taken) | set(env_keywords))
    hints = []
    for k in unknown:
        close = close_matches(k, known, n=1, cutoff=0.6)
        hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    env_part = f"; env keywords: {', '.join(sorted(env_keywords))}" if env_keywords else ""
    raise UnknownKeywordError(
        f"make({id!r}): unknown keyword {', '.join(hints)}. "
        f"{'Task' if env_keywords else 'Its'} keywords: {', '.join(taken) or 'none'}{env_part}"
    )


_PLAIN: dict[type, Callable[[object], bool]] = {
    int: lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
    float: lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool),
    str: lambda v: isinstance(v, (str, os.PathLike)),  # a path where a str path is taken
    bool: lambda v: isinstance(v, (bool, numbers.Integral)) and v in (0, 1),
}
"""The plain annotations a keyword's value is checked against (anything richer is the task's)."""


def _check_types(id: str, entry: Callable[..., object], given: dict[str, Any]) -> None:
    """Refuse a keyword whose value is not of its plain annotated type (``seed="a"`` for an
    ``int``): the task would take it and fail later, or worse, not at all."""
    try:
        hints = typing.get_type_hints(entry.__init__ if inspect.isclass(entry) else entry)
    except Exception:  # unresolvable annotations: the task checks its own
        return
    for key, value in given.items():
        hint = hints.get(key)
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            continue
        plain = [a for a in args if a is not type(None)] if args else [hint]
        checks = [_PLAIN[a] for a in plain if a in _PLAIN]
        if len(checks) == len(plain) and checks and not any(ok(value) for ok in checks):
            names = " or ".join(getattr(a, "__name__", str(a)) for a in plain)
            raise UnknownKeywordError(f"make({id!r}): {key}={value!r} must be {names}")


def check_keywords(id: str, kwargs: dict[str, Any]) -> None:
    """Refuse, as ``make(id, **kwargs)`` would, keywords the id's task (and its env) does not take
    or whose values are not of their type: for callers that build the task themselves."""
    s = spec(id)
    entry = s.load()
    if inspect.isclass(entry) and issubclass(entry, AECEnv):
        _check_keywords(id, entry, {**s.kwargs, **kwargs})
        return
    env_keywords = task_env().keywords()
    task_kwargs = {k: v for k, v in {**s.kwargs, **kwargs}.items() if k not in env_keywords}
    _check_keywords(id, entry, task_kwargs, env_keywords)
    _check_types(id, entry, task_kwargs)


def spec(id: str) -> EnvSpec:
    """The spec of ``id`` (a plain id or ``module:id``, :func:`resolve_id`)."""
    if not isinstance(id, str):
        raise WrongType(f"an env id is a string such as 'agon/arith-v0', got {id!r}; `agon envs` lists them")
    name = resolve_id(id)
    if name not in _REGISTRY:
        _register_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        if name != id:  # module:id, and the module imported: it registers no such id
            module = id.partition(":")[0]
            mine = sorted(i for i in _REGISTRY if _registered_by(_REGISTRY[i], module))
            theirs = f"it registers {', '.join(mine)}" if mine else "it registers no env id"
            raise UnknownName(
                f"env id {id!r}: {module!r} was imported, but registers no {name!r} ({theirs}); "
                + unknown_id_message("env id", name, sorted(_REGISTRY))
            ) from None
        raise UnknownName(unknown_id_message("env id", name, sorted(_REGISTRY))) from None


def _registered_by(s: EnvSpec, module: str) -> bool:
    """Whether ``s``'s entry point lives in ``module`` (or below it)."""
    where = s.entry_point if isinstance(s.entry_point, str) else getattr(s.entry_point, "__module__", "")
    return str(where).split(":")[0] == module or str(where).startswith(f"{module}.")


def with_split(id: str, kwargs: dict[str, Any], split: str | None) -> dict[str, Any]:
    """``kwargs`` for ``make(id, ...)`` on ``split``, when the task is built per split and
    ``kwargs`` does not name one already (a task without splits gets ``kwargs`` unchanged)."""
    if split is None or "split" in kwargs or not spec(id).takes("split"):
        return dict(kwargs)
    return {**kwargs, "split": split}


def registered_ids() -> list[str]:
    """Every id: the built-in ones, those registered in code, and installed entry points."""
    _register_entry_points()
    return sorted(_REGISTRY)


def all_specs() -> list[EnvSpec]:
    return [_REGISTRY[i] for i in registered_ids()]


class _OrderEnforced(OrderEnforcingWrapper):
    """PettingZoo's order check; ``last()`` after the episode asks the env, which can say why
    (PettingZoo's own ``last()`` reads the wrapper's reward dicts and ends in a bare ``KeyError``)."""

    def last(
        self, observe: bool = True
    ) -> tuple[dict[str, object] | None, float, bool, bool, dict[str, object]]:
        if not self.agents:
            return self.env.last(observe)
        return super().last(observe)


def make(id: str, **overrides: Any) -> OrderEnforcingWrapper:
    """Build the env registered as ``id`` (or ``module:id``, whose module is imported first);
    ``overrides`` replace its default kwargs.

    The env comes order-enforced, with ``.spec`` set (see the module docstring).
    """
    s = spec(id)
    entry = s.load()
    env: AECEnv
    if inspect.isclass(entry) and issubclass(entry, AECEnv):
        _check_keywords(id, entry, {**s.kwargs, **overrides})
        env = entry(**{**s.kwargs, **overrides})
    else:
        # A prebuilt task= makes the spec's task defaults moot; only the caller's kwargs remain.
        kwargs = dict(overrides) if "task" in overrides else {**s.kwargs, **overrides}
        task = kwargs.pop("task", None)
        wrapper = task_env()
        env_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in wrapper.keywords()}
        if task is None:
            _check_keywords(id, entry, kwargs, wrapper.keywords())
            _check_types(id, entry, kwargs)
            task = entry(**kwargs)
        elif kwargs:
            raise UnknownKeywordError(
                f"task= was given, so these task kwargs have nowhere to go: {sorted(kwargs)}"
            )
        env = task if isinstance(task, AECEnv) else wrapper(task, **env_kwargs)
    env.unwrapped.spec = s
    # A factory may itself return make()'s result; a second order check would add nothing.
    return env if isinstance(env, OrderEnforcingWrapper) else _OrderEnforced(env)
