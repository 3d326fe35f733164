"""Evaluation methods as a table: how each seats policies in the env, and what it reports.

A *method family* is a row of :data:`METHODS`; :func:`plan_methods` expands the rows a
user asks for (``agon eval --methods``) into concrete :class:`Method` s for the policies
at hand (``standalone`` gives one method per adapter, ``cascade`` one per ordered pair).
Everything downstream -- which methods choose a direction on validation, which give the
blind-spot pairs, which are the untrained base's (identical in every run), labels and
plot markers -- reads the row's fields, never the family's name.

==================  ===========  =======================================================
family              env mode     seats
==================  ===========  =======================================================
``base-few-shot``   solo         the base (all adapters disabled) on the bare prompt,
                                 after the family's worked examples
``base-zero-shot``  solo         the same without the worked examples (system prompt
                                 kept): the true zero-shot row
``moa``             challenge    base drafts, a second base sample refines after reading
                                 it (untrained Mixture-of-Agents)
``standalone``      solo         each adapter alone on the bare prompt
``self-cascade``    self         each adapter reads its own draft (the GRPO two-pass
                                 control)
``cascade``         challenge    X drafts, Y answers after reading the draft as the run's
                                 ``exchange`` says (summary by default), both orders; the
                                 reported order is chosen on validation
``latent-cascade``  challenge    X drafts, Y answers conditioned on the draft's KV cache
                                 (``exchange=latent``, the run's ``latent`` settings),
                                 both orders, all reported; not run unless asked for
==================  ===========  =======================================================

:class:`Policies` is what is evaluated (the base and the adapters, as agents): methods
are expanded for it, so it lives here and the evaluator imports both.

Every method but the two base rows uses the run's prompts (``prompts.few_shot``); the base
rows switch the worked examples on or off themselves, so each label holds for any run.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agon_env.agents.prompts import RolePrompts
from agon_env.agents.protocol import Agent
from agon_env.envs.exchange import CACHE_CHANNEL
from agon_env.errors import InputError, unknown_id_message
from agon_env.json_value import JSONRecord
from agon_env.upgrade import method_id as upgraded_id
from agon_env.vocabulary import AGENT_A, AGENT_B, BASE

if TYPE_CHECKING:
    from agon_env.options import LatentConfig

Seating = tuple[tuple[str, str], ...]
"""``(env seat, policy name)`` pairs; ``agent_a`` always drafts."""


@dataclass(frozen=True)
class MethodFamily:
    name: str
    env_mode: str
    label: str
    """Report label; ``{x}`` / ``{y}`` are the drafting / answering policies."""
    seatings: Callable[[Sequence[str]], list[Seating]]
    """Adapter names -> one seating per method of this family."""
    uses_base: bool = False
    """Seats only the untrained base: the same in every run (cached, not averaged across runs)."""
    single_sample: bool = False
    """One policy, one turn: its outcomes pair up for the blind-spot (error overlap) figures."""
    chooses_direction: bool = False
    """Several seatings of which one is reported, chosen on validation (never on test)."""
    marker: str = "o"
    """Matplotlib marker in the accuracy-vs-length figure."""
    few_shot: bool | None = None
    """Shows the worked examples (``True``) or not (``False``) whatever the run's prompts say;
    ``None`` keeps the run's."""
    exchange: str | None = None
    """The env's exchange channel (:data:`agon_env.envs.exchange.CHANNELS`); ``None``: the run's
    (``env.exchange``)."""
    default: bool = True
    """Run by ``agon eval`` unless ``--methods`` says otherwise."""

    def method_id(self, seating: Seating) -> str:
        policies = [p for _, p in seating]
        if self.uses_base:
            return self.name
        return f"{self.name}:{'>'.join(policies)}"


def _one(seating: Seating) -> Callable[[Sequence[str]], list[Seating]]:
    return lambda names: [seating]


METHODS: dict[str, MethodFamily] = {
    f.name: f
    for f in (
        MethodFamily(
            "base-few-shot",
            "solo",
            "Base, few-shot (worked examples)",
            _one(((AGENT_A, BASE),)),
            uses_base=True,
            single_sample=True,
            marker="o",
            few_shot=True,
        ),
        MethodFamily(
            "base-zero-shot",
            "solo",
            "Base, zero-shot (no worked examples)",
            _one(((AGENT_A, BASE),)),
            uses_base=True,
            single_sample=True,
            marker="v",
            few_shot=False,
        ),
        MethodFamily(
            "moa",
            "challenge",
            "MoA (untrained base → base)",
            _one(((AGENT_A, BASE), (AGENT_B, BASE))),
            uses_base=True,
            marker="s",
            exchange="summary",
        ),
        MethodFamily(
            "standalone",
            "solo",
            "Standalone {x}",
            lambda names: [((AGENT_A, n),) for n in names],
            single_sample=True,
            marker="^",
        ),
        MethodFamily(
            "self-cascade",
            "self",
            "Self-cascade {x} → {x}",
            lambda names: [((AGENT_A, n),) for n in names],
            marker="D",
        ),
        MethodFamily(
            "cascade",
            "challenge",
            "Cascade {x} → {y}",
            lambda names: [((AGENT_A, x), (AGENT_B, y)) for x, y in itertools.permutations(names, 2)],
            chooses_direction=True,
            marker="*",
        ),
        MethodFamily(
            "latent-cascade",
            "challenge",
            "Latent cascade {x} → {y}",
            lambda names: [((AGENT_A, x), (AGENT_B, y)) for x, y in itertools.permutations(names, 2)],
            marker="P",
            exchange=CACHE_CHANNEL,
            default=False,
        ),
    )
}
DEFAULT_METHODS: tuple[str, ...] = tuple(n for n, f in METHODS.items() if f.default)
"""What ``agon eval`` runs without ``--methods``."""


@dataclass(frozen=True)
class Method:
    id: str
    family: MethodFamily
    seats: Seating

    @property
    def policies(self) -> tuple[str, ...]:
        return tuple(p for _, p in self.seats)

    def label(self, selected: bool | None = None) -> str:
        x, y = self.policies[0], self.policies[-1]
        text = self.family.label.format(x=x, y=y)
        if self.family.chooses_direction and selected is not None:
            text += " (chosen on validation)" if selected else " (not chosen; diagnostic)"
        return text


@dataclass
class Policies:
    """What can be evaluated: the adapter-disabled base and zero or more adapters, as agents.

    ``identities`` names each agent for the sample cache (model, adapter fingerprint,
    sampling settings); only the base's samples are written to disk.
    """

    label: str
    base: Agent | None
    adapters: dict[str, Agent] = field(default_factory=dict)
    identities: dict[str, str] = field(default_factory=dict)
    algo: str = ""
    """The algorithm that trained the adapters: "across runs" averages only runs of one algorithm."""
    exchange: str | None = None
    """The run's exchange channel (``env.exchange``): methods without their own use it."""
    env_options: JSONRecord = field(default_factory=dict)
    """The run's other env keywords (``lam``, ``gamma``, ...: ``ResolvedRun.reader_options``),
    so the evaluation env is the one the run trained in."""
    latent: LatentConfig | None = None
    """The run's :class:`~agon_env.options.LatentConfig` (the cache channel's settings)."""

    def agent(self, name: str, few_shot: bool | None = None) -> Agent:
        """The policy's agent; ``few_shot`` set: with the worked examples on or off."""
        if name == BASE:
            if self.base is None:
                raise KeyError("this evaluation has no base policy")
            agent = self.base
        else:
            agent = self.adapters[name]
        if few_shot is None:
            return agent
        shown = with_examples(agent, few_shot)
        if shown is None:
            raise KeyError(f"policy {name!r} renders its own prompts: no worked examples to turn off")
        return shown

    def identity(self, name: str, few_shot: bool | None = None) -> str:
        """The cache and seed identity; a changed worked-examples setting is another policy."""
        ident = self.identities.get(name, f"{self.label}:{name}")
        if few_shot is None or self.agent(name, few_shot) is self.agent(name):
            return ident
        return f"{ident}|worked examples {'on' if few_shot else 'off'}"

    def can_show_examples(self, few_shot: bool) -> bool:
        """Whether the base can be run with its worked examples on (or off, ``False``)."""
        return self.base is not None and with_examples(self.base, few_shot) is not None


def with_examples(agent: Agent, few_shot: bool) -> Agent | None:
    """``agent`` showing the worked examples (``few_shot``) or not: itself when it already does,
    a copy with that :class:`RolePrompts` setting otherwise. An agent without ``RolePrompts``
    renders its own prompts: it counts as few-shot as it is, and has no zero-shot variant."""
    prompts = getattr(agent, "prompts", None)
    if not isinstance(prompts, RolePrompts):
        return agent if few_shot else None
    if prompts.few_shot == few_shot:
        return agent
    variant = copy.copy(agent)
    variant.prompts = replace(prompts, few_shot=few_shot)  # type: ignore[attr-defined]
    return variant


def check_names(names: Sequence[str]) -> None:
    for n in names:
        if n not in METHODS:
            raise InputError(unknown_id_message("eval method", n, list(METHODS)))


def plan_methods(policies: Policies, names: Sequence[str]) -> list[Method]:
    """The methods ``names`` ask for that ``policies`` can run (base-only runs skip adapter ones)."""
    check_names(names)
    out = []
    for family in METHODS.values():
        if family.name not in names or (family.uses_base and policies.base is None):
            continue
        if family.few_shot is not None and not policies.can_show_examples(family.few_shot):
            continue
        out += [Method(family.method_id(s), family, s) for s in family.seatings(list(policies.adapters))]
    return out


def method_of(method_id: str, policies: Sequence[str] = ()) -> Method | None:
    """The :class:`Method` behind a stored id (``cascade:agent_a>agent_b``), for reports; an id
    an older version stored is read in today's spelling (:func:`agon_env.upgrade.method_id`)."""
    method_id = upgraded_id(method_id)
    name, _, rest = method_id.partition(":")
    family = METHODS.get(name)
    if family is None:
        return None
    names = rest.split(">") if rest else list(policies)
    for seating in family.seatings(names or [BASE]):
        if family.method_id(seating) == method_id:
            return Method(method_id, family, seating)
    return None
