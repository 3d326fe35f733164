"""Turning run folders (or nothing: the untrained base) into :class:`Policies` for the evaluator.

A run folder written by ``agon train`` holds ``config.yaml`` (model, env, sampling),
``adapters/<name>/`` (peft folders, written at the end of a run) and ``checkpoint.pt``
(written during it). Adapters are read from ``adapters/`` when present, else from the
checkpoint, so a run that was stopped early can still be evaluated.

Every run is loaded onto one :class:`~agon_env.agents.adapters.SharedBase` per base
model: each adapter gets a unique name on the base (``r0_agent_a``) while its agent
keeps the run's name (``agent_a``), so methods read the same across runs and several
runs cost one base in memory.

Each run is evaluated with its own :class:`Settings` (sampling, per-adapter temperatures,
prompt family, few-shot, chat template, env keywords and channel), read from its own
resolved run (``resolved.yaml`` over ``config.yaml``, :func:`agon_env.run_folder.load_resolved`).
What runs share is the base's samples, and only where their settings agree: the cache identity of every
policy holds its sampling and prompts, so base samples drawn for one run's settings are
never served to a run with others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agon_env.agents.prompts import family_of, role_prompts
from agon_env.agents.protocol import SamplingParams
from agon_env.config import TrainConfig
from agon_env.evaluation.methods import BASE, Policies
from agon_env.json_value import JSONRecord
from agon_env.resolved import ResolvedRun
from agon_env.runtime import RunOnDisk, Runtime, adapter_sources
from agon_env.vocabulary import REFERENCE

if TYPE_CHECKING:
    import torch

    from agon_env.agents.adapters import SharedBase
    from agon_env.agents.prompt_families import RolePrompts
    from agon_env.envs.tasks.base import Task


@dataclass(frozen=True)
class Settings:
    """How one run's policies sample and what they read: as the run resolved them, after the
    command line's overrides."""

    run: ResolvedRun
    """The run: per-policy ``sampling``, its channel and env keywords, its config."""
    prompts: RolePrompts
    """Its :class:`~agon_env.agents.prompts.RolePrompts` (family and few-shot setting)."""
    family: str

    @property
    def cfg(self) -> TrainConfig:
        return self.run.config

    def sampling(self, name: str) -> SamplingParams:
        """How policy ``name`` samples, as the run resolved it (an adapter at its own
        temperature, the untrained base at the run's), as in training and its held-out check."""
        return self.run.policy_sampling(name)

    def describe(self, adapters: Iterable[str] = ()) -> JSONRecord:
        """The record ``eval.json`` keeps per run: everything that changes what is sampled."""
        return {
            "sampling": asdict(self.sampling(BASE)),
            "temperatures": {n: self.sampling(n).temperature for n in (BASE, *adapters)},
            "prompts": {"family": self.family, "few_shot": self.prompts.few_shot},
            "chat_template_kwargs": dict(self.cfg.model.chat_template_kwargs),
            "exchange": self.run.exchange,
        }


def settings_for(run: ResolvedRun, task: Task, **overrides: Any) -> Settings:
    """A run's :class:`Settings` on ``task``: its prompt family and few-shot setting, its
    sampling with the command line's ``overrides`` (``None``: keep the run's)."""
    run = run.with_sampling(**overrides)
    prompts = run.config.prompts
    return Settings(run, role_prompts(task, prompts), family_of(task, prompts.family))


def _fingerprint(source: Path | dict[str, torch.Tensor]) -> str:
    from agon_env.agents.adapters import ADAPTER_WEIGHTS

    h = hashlib.sha256()
    if isinstance(source, Path):
        h.update((source / ADAPTER_WEIGHTS).read_bytes())
    else:
        for k in sorted(source):
            h.update(k.encode())
            h.update(source[k].detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def weights_hashes(run_dir: str | Path | RunOnDisk) -> dict[str, str]:
    """Each adapter of a run folder -> a hash of its weights, as its sample identity holds it:
    two folders with the same hashes hold the same policies (:mod:`agon_env.evaluation.checks`)."""
    sources = run_dir.sources if isinstance(run_dir, RunOnDisk) else adapter_sources(run_dir)
    return {name: _fingerprint(source) for name, source in sources.items()}


def _reads(settings: Settings) -> tuple[RolePrompts, dict[str, Any]]:
    """What a policy's prompts are made of: the role prompts and the chat-template options."""
    return (settings.prompts, dict(settings.cfg.model.chat_template_kwargs))


def _identity(
    model: str,
    who: str,
    sampling: SamplingParams,
    prompts: object,
    dtype: str = "float32",
    backend: str = "hf",
) -> str:
    prompts = hashlib.sha256(repr(prompts).encode()).hexdigest()[:12]
    s = asdict(sampling)
    # How a batch is split does not change what is sampled; seeds are per row.
    for k in ("max_batch_size", "max_batch_tokens", "seed"):
        s.pop(k)
    # Another dtype samples other completions; fp32 identities stay as they were recorded.
    model = model if dtype == "float32" else f"{model}@{dtype}"
    # Another backend's kernels sample other completions too; HF identities stay as recorded.
    model = model if backend == "hf" else f"{model}@{backend}"
    return json.dumps({"model": model, "policy": who, "sampling": s, "prompts": prompts}, sort_keys=True)


def run_task_kwargs(cfg: TrainConfig, env_id: str) -> dict[str, Any]:
    """A run's task keywords (e.g. ``difficulty``) where they apply: on the run's own env only."""
    return dict(cfg.env.kwargs) if env_id == cfg.env.id else {}


class PolicyLoader:
    """Builds each run's agents over one :class:`~agon_env.runtime.Runtime` (a base per model and
    dtype, a backend per base), each with its run's :class:`Settings`.

    ``device``: where the bases live (``auto``: CUDA when this machine has it, the rule training
    follows); each base in its run's ``model.dtype`` on that device (:func:`agon_env.resolved.dtype_on`).
    ``backend``: what generates (:data:`agon_env.runtime.BACKENDS`; ``auto`` as the serving commands)."""

    def __init__(self, device: str = "auto", backend: str = "hf") -> None:
        self.runtime = Runtime(device, backend)
        self.device = self.runtime.device

    def dtype(self, cfg: TrainConfig) -> str:
        """The dtype a run's base loads in here."""
        return self.runtime.dtype(cfg)

    def _identity(self, model: str, who: str, sampling: SamplingParams, prompts: object, dtype: str) -> str:
        return _identity(model, who, sampling, prompts, dtype, self.runtime.backend_name)

    def shared_base(self, model: str, dtype: str = "float32") -> SharedBase:
        return self.runtime.base(model, dtype)

    def base_policies(self, model: str, settings: Settings, label: str = "base") -> Policies:
        dtype = self.dtype(settings.cfg)
        base = self.shared_base(model, dtype)
        return Policies(
            label=label,
            base=self.runtime.agent(BASE, base, REFERENCE, settings.run, settings.prompts),
            identities={
                BASE: self._identity(model, "base", settings.sampling(BASE), _reads(settings), dtype)
            },
        )

    def run_policies(
        self, run_dir: str | Path | RunOnDisk, settings: Settings, index: int = 0, model: str | None = None
    ) -> Policies:
        """The run's base and adapters; ``settings`` are the run's own (:func:`settings_for`)."""
        disk = run_dir if isinstance(run_dir, RunOnDisk) else None
        run_dir = disk.path if disk else Path(run_dir)
        cfg = settings.cfg
        model = model or cfg.model.name
        policies = self.base_policies(model, settings, label=str(run_dir))
        policies.algo, policies.exchange, policies.latent = cfg.algo, settings.run.exchange, cfg.latent
        policies.env_options = settings.run.reader_options()
        dtype = self.dtype(cfg)
        base = self.shared_base(model, dtype)
        for name, (unique, source) in self.runtime.load_adapters(
            base, disk.sources if disk else adapter_sources(run_dir), cfg, f"r{index}_"
        ).items():
            policies.adapters[name] = self.runtime.agent(name, base, unique, settings.run, settings.prompts)
            policies.identities[name] = self._identity(
                model,
                # The adapter's weights and name, never the folder it was read from: the same
                # adapters sample the same completions wherever they lie (a resumed, a Ray and
                # an uninterrupted unit; a copied or renamed run).
                f"adapter:{name}:{_fingerprint(source)}",
                settings.sampling(name),
                _reads(settings),
                dtype,
            )
        return policies
