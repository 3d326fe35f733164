"""Turning run folders (or nothing: the untrained base) into :class:`Policies` for the evaluator.

A run folder written by ``agon train`` holds ``config.yaml`` (model, env, sampling),
``adapters/<name>/`` (peft folders, written at the end of a run) and ``checkpoint.pt``
(written during it). Adapters are read from ``adapters/`` when present, else from the
checkpoint, so a run that was stopped early can still be evaluated.

Every run is loaded onto one :class:`~agon_env.agents.adapters.SharedBase` per base
model: each adapter gets a unique name on the base (``r0_agent_a``) while its agent
keeps the run's name (``agent_a``), so methods read the same across runs and several
runs cost one base in memory.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agon_env.agents.protocol import SamplingParams
from agon_env.algorithms.config import ConfigError, TrainConfig, load_run_config
from agon_env.evaluation.evaluate import Policies
from agon_env.evaluation.methods import BASE
from agon_env.vocabulary import REFERENCE


class RunFolderError(ValueError):
    """A folder given as a run cannot be evaluated; the message says why."""


def read_run_config(run_dir: str | Path) -> TrainConfig:
    """The run's ``config.yaml`` as a :class:`TrainConfig` (the same dataclasses ``agon train`` wrote)."""
    if not Path(run_dir).is_dir():
        raise RunFolderError(f"{run_dir}: no such run folder")
    try:
        return load_run_config(run_dir)
    except ConfigError as exc:
        raise RunFolderError(str(exc)) from None


def sampling_for(cfg: TrainConfig, **overrides: Any) -> SamplingParams:
    """The run's rollout sampling, with the command line's overrides (``None``: keep the run's)."""
    return replace(cfg.sampling, **{k: v for k, v in overrides.items() if v is not None})


def _adapter_sources(run_dir: Path) -> dict[str, Path | dict[str, Any]]:
    """Adapter name -> a peft folder, or -> its state dict from the checkpoint."""
    folder = run_dir / "adapters"
    found: dict[str, Path | dict[str, Any]] = {}
    if folder.is_dir():
        for sub in sorted(folder.iterdir()):
            if (sub / "adapter_model.safetensors").is_file():
                found[sub.name] = sub
    if found:
        return found
    ckpt = run_dir / "checkpoint.pt"
    if ckpt.is_file():
        import torch

        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        return dict(state.get("adapters") or {})
    raise RunFolderError(f"{run_dir} has neither adapters/<name>/ nor checkpoint.pt: nothing to evaluate")


def _fingerprint(source: Path | dict[str, Any]) -> str:
    h = hashlib.sha256()
    if isinstance(source, Path):
        h.update((source / "adapter_model.safetensors").read_bytes())
    else:
        for k in sorted(source):
            h.update(k.encode())
            h.update(source[k].detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _identity(model: str, who: str, sampling: SamplingParams, prompts: Any) -> str:
    prompts = hashlib.sha256(repr(prompts).encode()).hexdigest()[:12]
    s = asdict(sampling)
    # How a batch is split does not change what is sampled; seeds are per row.
    for k in ("max_batch_size", "max_batch_tokens", "seed"):
        s.pop(k)
    return json.dumps({"model": model, "policy": who, "sampling": s, "prompts": prompts}, sort_keys=True)


class PolicyLoader:
    """Loads each base model once and builds agents over it."""

    def __init__(
        self, sampling: SamplingParams, prompts: Any, device: str = "cpu", template_kwargs: Any = None
    ) -> None:
        """``prompts`` (:class:`~agon_env.agents.prompts.RolePrompts`) and chat-template options
        as the run trained with."""
        self.sampling, self.prompts, self.device = sampling, prompts, device
        self.template_kwargs = dict(template_kwargs or {})
        self._bases: dict[str, Any] = {}

    def shared_base(self, model: str) -> Any:
        if model not in self._bases:
            from agon_env.agents.adapters import SharedBase

            self._bases[model] = SharedBase.from_source(model, device=self.device)
        return self._bases[model]

    def _agent(self, name: str, base: Any, adapter: str) -> Any:
        from agon_env.agents import LLMAgent

        return LLMAgent(
            name=name,
            base=base,
            adapter=adapter,
            sampling=self.sampling,
            prompts=self.prompts,
            template_kwargs=self.template_kwargs,
        )

    def base_policies(self, model: str, label: str = "base") -> Policies:
        base = self.shared_base(model)
        return Policies(
            label=label,
            base=self._agent(BASE, base, REFERENCE),
            identities={BASE: _identity(model, "base", self.sampling, (self.prompts, self.template_kwargs))},
        )

    def run_policies(self, run_dir: str | Path, index: int = 0, model: str | None = None) -> Policies:
        run_dir = Path(run_dir)
        cfg = read_run_config(run_dir)
        model = model or cfg.model.name
        policies = self.base_policies(model, label=str(run_dir))
        policies.algo = cfg.algo
        base = self.shared_base(model)
        for name, source in _adapter_sources(run_dir).items():
            unique = f"r{index}_{name}"
            if unique not in base.adapters:
                if isinstance(source, Path):
                    base.load(unique, source)
                else:
                    self._add_from_state(base, unique, source, cfg)
            policies.adapters[name] = self._agent(name, base, unique)
            policies.identities[name] = _identity(
                model,
                f"{run_dir.resolve()}:{name}:{_fingerprint(source)}",
                self.sampling,
                (self.prompts, self.template_kwargs),
            )
        return policies

    @staticmethod
    def _add_from_state(base: Any, name: str, state: dict[str, Any], cfg: TrainConfig) -> None:
        from agon_env.agents.adapters import LoraSpec

        base.add_adapter(name, LoraSpec(r=cfg.model.lora_r, alpha=cfg.model.lora_alpha))
        base.load_adapter_state_dict(name, state)
