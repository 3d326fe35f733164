"""A study plan: a YAML file backed by :class:`StudyPlan`, as ``TrainConfig`` backs a preset.

    name: my-ablation
    train: {model.name: smollm2-135m, steps: 60, batch_problems: 4, threads: 1}
    arms:
      grpo: {algo: grpo}
      agon: {algo: agon}
      agon-none: {algo: agon, env.exchange: none}
    seeds: [0, 1, 2]
    evaluation: {test_problems: 300, val_problems: 150}
    calibration: {keyword: difficulty, candidates: [2.5, 3, 2]}
    comparisons: [agon - grpo]
    exploratory: [agon-none - agon]

Every unit (an arm with a seed) is the ``TrainConfig`` of ``config`` (a preset), then ``train``,
then the arm's overrides, then the unit's seed, run folder and calibrated task keyword;
:func:`check` resolves each one (``agon_env.algorithms.validation.ready``) before anything
runs, so a mistyped key, plugin or arm is one line and nothing is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agon_env.config import ConfigError, TrainConfig, compose, convert, plain, read_yaml
from agon_env.errors import MissingFile
from agon_env.json_value import JSONRecord

UNIT = {
    "progress": False,
    "time_budget_min": 0,
    "stop_if_not_learning": False,
    "heldout_problems": 0,
    "report_to": ["none"],
}
"""What every unit's run is told on top of the plan: no wall-clock budget and no stop when it does
not learn (every arm runs all its steps, so a resumed unit ends where an uninterrupted one does),
no end-of-run held-out check (the study's evaluation is the larger one), no live progress bar or
tracker (a unit's log is a file)."""

MINUS = (" − ", " - ")
"""How a comparison is written: ``first - second`` (spaces around, so arm names keep hyphens)."""


@dataclass
class Evaluation:
    """The held-out evaluation every unit gets after training (``agon eval`` of its run folder)."""

    methods: list[str] = field(default_factory=lambda: ["standalone", "cascade"])
    """Each arm's methods; its two-stage method (``cascade``, or ``self-cascade`` for a
    one-adapter plugin) is always added. Sampling is each run's own."""
    base_methods: list[str] = field(default_factory=lambda: ["base-few-shot", "base-zero-shot", "moa"])
    """The untrained base's reference rows (one ``base`` unit; [] = none)."""
    test_problems: int = 200
    """Test problems (disjoint by content from training and validation)."""
    val_problems: int = 50
    """Validation problems: they choose each cascade's direction, never test."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Evaluation sampling seeds."""


@dataclass
class Calibration:
    """A search over one task keyword for the untrained base's few-shot pass@1 on validation."""

    keyword: str = "difficulty"
    """The task keyword searched (any keyword of the plan's env id)."""
    candidates: list[Any] = field(default_factory=list)
    """Values to try, in order: the first inside ``band`` is used, else the one nearest its middle
    (one candidate: measured and used)."""
    band: list[float] = field(default_factory=lambda: [0.20, 0.40])
    """The base pass@1 wanted: hard, yet with reward variance in a group."""
    problems: int = 100
    """Validation problems per candidate (never test)."""


@dataclass
class Decision:
    """The rule each primary comparison's verdict follows, fixed before the results."""

    confidence: float = 0.95
    """Coverage of every interval (bootstrap over seeds × problems; t over seeds)."""
    every_seed: bool = True
    """A verdict also needs every seed's difference to have its sign (the guard against one lucky
    interval among several comparisons; there is no multiplicity correction)."""
    equivalence_margin: float | None = None
    """A "no difference" claim's margin in pass@1 (0.03 = ±3 pp): equivalent when the interval lies
    inside it (two one-sided tests). None: no equivalence is claimed, only "no difference shown"."""


@dataclass
class StudyPlan:
    """An ablation across arms and seeds: every field is fixed before any result exists."""

    name: str = "study"
    """The study's name (tables and figure say it)."""
    config: str | None = None
    """A ``TrainConfig`` preset (a .yaml path) every unit starts from; None: ``TrainConfig()``."""
    train: dict[str, Any] = field(default_factory=dict)  # read by get_type_hints: no recursive alias
    """``TrainConfig`` overrides (dotted or nested keys) of every unit, on top of ``config``."""
    arms: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Arm name -> ``TrainConfig`` overrides, ``algo`` (the algorithm plugin) among them, e.g.
    ``agon-none: {algo: agon, env.exchange: none}``."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Training seeds: every arm trains once with each (seed ``s`` of every arm shares its problems)."""
    evaluation: Evaluation = field(default_factory=Evaluation)
    calibration: Calibration | None = None
    """None: the task as ``train`` sets it, nothing measured."""
    comparisons: list[str] = field(default_factory=list)
    """Primary comparisons, ``first - second`` (arm − arm): each reported standalone and two-stage,
    with a verdict under ``decision``."""
    exploratory: list[str] = field(default_factory=list)
    """Comparisons reported without a verdict (marked exploratory)."""
    decision: Decision = field(default_factory=Decision)

    def as_dict(self) -> JSONRecord:
        return plain(dataclasses.asdict(self))

    def sha256(self) -> str:
        """The plan's content hash: what a registration freezes (key order and comments aside)."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()

    def yaml(self) -> str:
        return yaml.safe_dump(self.as_dict(), sort_keys=False, allow_unicode=True)

    def base_config(self) -> TrainConfig:
        """The training base (``config`` then ``train``), before any arm."""
        return compose(self.config, self.train)

    def unit_config(
        self, arm: str, seed: int, task: JSONRecord | None = None, out_dir: str = ""
    ) -> TrainConfig:
        """Unit ``arm`` × ``seed``'s ``TrainConfig`` (``task``: the calibrated keyword, if any)."""
        extra: JSONRecord = {"seed": seed, **({"out_dir": out_dir} if out_dir else {})}
        if task:
            extra["env.kwargs"] = {**self.base_config().env.kwargs, **task}
        return compose(self.config, {**self.train, **self.arms[arm], **UNIT, **extra})

    def pairs(self, which: str = "comparisons") -> list[tuple[str, str]]:
        return [split(c) for c in getattr(self, which)]


def unit_name(arm: str, seed: int | str) -> str:
    """The name of unit ``arm`` × ``seed``: its run folder, eval folder, log and results key."""
    return f"{arm}-seed{seed}"


def split(comparison: str) -> tuple[str, str]:
    """``"agon - grpo"`` -> ``("agon", "grpo")``."""
    for sep in MINUS:
        if sep in comparison:
            first, _, second = comparison.partition(sep)
            return first.strip(), second.strip()
    raise ConfigError(f"comparison {comparison!r}: write it as 'ARM - ARM' (spaces around the minus)")


def _build(cls: type, data: Any, where: str) -> Any:
    """``cls`` from a YAML mapping, every key checked against its fields (one line per mistake)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'plan'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        from agon_env.errors import close_matches

        guess = close_matches(str(unknown[0]), names)
        hint = f"did you mean {' or '.join(guess)}?" if guess else f"known: {', '.join(names)}"
        raise ConfigError(f"plan key {where}{unknown[0]!r} is unknown; {hint}")
    out = {}
    for k, v in data.items():
        tp = hints[k]
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        target = tp if dataclasses.is_dataclass(tp) else inner[0] if len(inner) == 1 else None
        if target is not None and dataclasses.is_dataclass(target) and v is not None:
            out[k] = _build(target, v, f"{where}{k}.")
        else:
            out[k] = convert(f"{where}{k}", tp, v)
    return cls(**out)


def from_dict(data: JSONRecord) -> StudyPlan:
    """A plan from its mapping (YAML), its keys and types checked; :func:`check` does the rest.
    A ``grid:`` is crossed into the arms first (:mod:`agon_env.study.grid`)."""
    from agon_env.study.grid import expand

    plan: StudyPlan = _build(StudyPlan, expand(data, split), "")
    for arm, overrides in plan.arms.items():
        if not isinstance(overrides, dict):
            raise ConfigError(f"arm {arm!r}: expected a mapping of TrainConfig keys, e.g. {{algo: agon}}")
    return plan


def load(path: str | Path) -> StudyPlan:
    """The plan in ``path`` (YAML), keys and types checked."""
    path = Path(path)
    if not path.is_file():
        raise MissingFile(f"no study plan {path}")
    try:
        return from_dict(read_yaml(path, "study plan"))
    except ConfigError as exc:
        raise ConfigError(f"study plan {path}: {exc}") from None


def two_stage(algo: str) -> str:
    """A plugin's two-stage method: ``self-cascade`` for one adapter (it reads its own draft),
    else ``cascade`` (the other adapter reads it; direction chosen on validation)."""
    from agon_env.algorithms.registry import get_algorithm

    return "self-cascade" if len(get_algorithm(algo).adapters) == 1 else "cascade"


def episode_turns(algo: str) -> int:
    """Turns a training episode of plugin ``algo`` plays: 2 where a challenger answers a draft
    (agon, coop, self-refine), 1 alone (grpo). A unit's cost grows with them (the challenger's turn also
    reads the draft), so ``agon study status`` weights its estimate by them."""
    from agon_env.algorithms.registry import get_algorithm
    from agon_env.envs.draft_challenge import MODES

    return 2 if MODES[get_algorithm(algo).env_mode].challenge else 1


def check(plan: StudyPlan) -> dict[str, TrainConfig]:
    """Every arm's first unit, resolved as ``agon train`` would (a ``ConfigError`` naming the arm
    otherwise), and every comparison's arms present; returns arm -> its config."""
    from agon_env.algorithms.validation import ready

    if not plan.arms:
        raise ConfigError("a study plan needs arms, e.g. arms: {grpo: {algo: grpo}, agon: {algo: agon}}")
    if not plan.seeds:
        raise ConfigError("a study plan needs seeds, e.g. seeds: [0, 1, 2]")
    _check_sizes(plan)
    configs = {}
    for arm in plan.arms:
        try:
            configs[arm] = ready(plan.unit_config(arm, plan.seeds[0]))
        except ConfigError as exc:
            raise ConfigError(f"arm {arm!r}: {exc}") from None
    for which in ("comparisons", "exploratory"):
        for first, second in plan.pairs(which):
            missing = [a for a in (first, second) if a not in plan.arms]
            if missing:
                raise ConfigError(
                    f"{which}: {first} - {second} names {missing[0]!r}, "
                    f"not an arm of the plan ({', '.join(plan.arms)})"
                )
    rule = plan.decision
    if not 0 < rule.confidence < 1:
        raise ConfigError(
            f"decision.confidence: {rule.confidence:g} is no coverage; give one in (0, 1), e.g. 0.95"
        )
    if rule.equivalence_margin is not None and not 0 < rule.equivalence_margin < 1:
        raise ConfigError(
            f"decision.equivalence_margin: {rule.equivalence_margin:g} is no margin in pass@1; "
            "give one in (0, 1), e.g. 0.03 for ±3 pp"
        )
    cal = plan.calibration
    if cal is not None and not cal.candidates:
        raise ConfigError("calibration.candidates: give at least one value of calibration.keyword")
    if cal is not None:  # a mistyped keyword is one line now, not a failed calibration unit later
        from agon_env.registry import spec

        env_id = next(iter(configs.values())).env.id
        if not spec(env_id).takes(cal.keyword):
            raise ConfigError(f"calibration.keyword {cal.keyword!r}: {env_id} takes no such keyword")
    from agon_env.evaluation.methods import check_names

    check_names([*plan.evaluation.methods, *plan.evaluation.base_methods])
    e = plan.evaluation
    cascades = [arm for arm, cfg in configs.items() if two_stage(cfg.algo) == "cascade"]
    if e.val_problems < 1 and (cascades or "cascade" in e.methods):
        who = f"arm {cascades[0]!r}" if cascades else "evaluation.methods"
        raise ConfigError(
            f"evaluation.val_problems: {e.val_problems}, but {who} evaluates a cascade, whose "
            "direction validation chooses; give at least 1"
        )
    return configs


def _duplicate(values: list[Any]) -> Any:
    return next((v for i, v in enumerate(values) if v in values[:i]), None)


def _check_sizes(plan: StudyPlan) -> None:
    """What would otherwise fail only after every unit has trained: an evaluation of no problems,
    a seed listed twice (its unit would run once and be counted twice), a calibration of nothing."""
    e = plan.evaluation
    if (seed := _duplicate(plan.seeds)) is not None:
        raise ConfigError(f"seeds: {seed} is listed twice in {plan.seeds}; each seed trains one unit per arm")
    if e.test_problems < 1:
        raise ConfigError(
            f"evaluation.test_problems: {e.test_problems}; every unit is scored on test "
            "problems, give at least 1"
        )
    if e.val_problems < 0:
        raise ConfigError(f"evaluation.val_problems: {e.val_problems} is no number of problems")
    if not e.seeds or (seed := _duplicate(e.seeds)) is not None:
        raise ConfigError(f"evaluation.seeds: {e.seeds}; give distinct sampling seeds, e.g. [0]")
    cal = plan.calibration
    if cal is not None and cal.problems < 1:
        raise ConfigError(f"calibration.problems: {cal.problems}; the calibration needs at least 1 problem")
    if cal is not None and not (len(cal.band) == 2 and 0 <= cal.band[0] <= cal.band[1] <= 1):
        raise ConfigError(f"calibration.band: {cal.band} is no band of pass@1; give [low, high] in [0, 1]")
