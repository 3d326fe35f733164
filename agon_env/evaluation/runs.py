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
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import yaml

from agon_env.agents.protocol import SamplingParams
from agon_env.evaluation.evaluate import Policies
from agon_env.evaluation.methods import BASE
from agon_env.vocabulary import REFERENCE

DEFAULT_MODEL = "smollm2-135m"


class RunFolderError(ValueError):
    """A folder given as a run cannot be evaluated; the message says why."""


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / "config.yaml"
    if not Path(run_dir).is_dir():
        raise RunFolderError(f"{run_dir}: no such run folder")
    if not path.is_file():
        raise RunFolderError(f"{run_dir} has no config.yaml: not a run folder written by `agon train`")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise RunFolderError(f"{path} is not a YAML mapping")
    return data


def default_preset() -> dict[str, Any]:
    """The packaged ``agon train`` default (model, env, sampling), used when no run is given."""
    from importlib import resources

    try:
        text = resources.files("agon_env").joinpath("configs", "default.yaml").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return {}
    return yaml.safe_load(text) or {}


def sampling_from_config(cfg: dict[str, Any], **overrides: Any) -> SamplingParams:
    """The run's rollout sampling (its ``sampling`` section), with command-line overrides."""
    known = {f.name for f in fields(SamplingParams)}
    saved = {k: v for k, v in (cfg.get("sampling") or {}).items() if k in known}
    if "stop" in saved:
        saved["stop"] = tuple(saved["stop"])
    return SamplingParams(**{**saved, **{k: v for k, v in overrides.items() if v is not None}})


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


def _identity(model: str, who: str, sampling: SamplingParams) -> str:
    from agon_env.agents.prompts import RolePrompts

    prompts = hashlib.sha256(repr(RolePrompts()).encode()).hexdigest()[:12]
    s = asdict(sampling)
    # How a batch is split does not change what is sampled; seeds are per row.
    for k in ("max_batch_size", "max_batch_tokens", "seed"):
        s.pop(k)
    return json.dumps({"model": model, "policy": who, "sampling": s, "prompts": prompts}, sort_keys=True)


class PolicyLoader:
    """Loads each base model once and builds agents over it."""

    def __init__(self, sampling: SamplingParams, device: str = "cpu") -> None:
        self.sampling, self.device = sampling, device
        self._bases: dict[str, Any] = {}

    def shared_base(self, model: str) -> Any:
        if model not in self._bases:
            from agon_env.agents.adapters import SharedBase

            self._bases[model] = SharedBase.from_source(model, device=self.device)
        return self._bases[model]

    def _agent(self, name: str, base: Any, adapter: str) -> Any:
        from agon_env.agents import LLMAgent

        return LLMAgent(name=name, base=base, adapter=adapter, sampling=self.sampling)

    def base_policies(self, model: str, label: str = "base") -> Policies:
        base = self.shared_base(model)
        return Policies(
            label=label,
            base=self._agent(BASE, base, REFERENCE),
            identities={BASE: _identity(model, "base", self.sampling)},
        )

    def run_policies(self, run_dir: str | Path, index: int = 0, model: str | None = None) -> Policies:
        run_dir = Path(run_dir)
        cfg = read_run_config(run_dir)
        model = model or (cfg.get("model") or {}).get("name") or DEFAULT_MODEL
        policies = self.base_policies(model, label=str(run_dir))
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
                model, f"{run_dir.resolve()}:{name}:{_fingerprint(source)}", self.sampling
            )
        return policies

    @staticmethod
    def _add_from_state(base: Any, name: str, state: dict[str, Any], cfg: dict[str, Any]) -> None:
        from agon_env.agents.adapters import LoraSpec

        m = cfg.get("model") or {}
        base.add_adapter(name, LoraSpec(r=int(m.get("lora_r", 16)), alpha=int(m.get("lora_alpha", 32))))
        base.load_adapter_state_dict(name, state)
