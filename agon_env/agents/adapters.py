"""One frozen base model, any number of named LoRA adapters on it.

Two policies cost one base plus two small adapters, not two models: every adapter is
a set of ``lora_A``/``lora_B`` matrices injected (by peft) next to the same frozen
linear layers. Switching the active adapter flips a name in each LoRA layer; the base
weights are never written (sampling may run on a merged *copy*, :meth:`SharedBase.sampling`).
With the adapter disabled the model *is* the base, which serves as a free reference
policy (KL penalty, untrained baseline).

Typical use::

    base = SharedBase.from_source("smollm2-135m")
    base.add_adapter("agent_a", LoraSpec(init_seed=1))
    base.add_adapter("agent_b", LoraSpec(init_seed=2))
    opt_a = torch.optim.AdamW(base.parameters("agent_a"), lr=5e-5)
    with base.use("agent_a"):
        loss = ...  # forward through base.model
    with base.reference():
        ref_logits = ...
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from agon_env.agents.merge import MergedWeights
from agon_env.vocabulary import REFERENCE

ADAPTER_WEIGHTS = "adapter_model.safetensors"
"""The weights file of a saved adapter folder (peft's name; its presence marks a saved adapter)."""


def read_adapter_config(folder: Path) -> dict[str, Any]:
    """A peft adapter folder's ``adapter_config.json`` (peft writes it; a run's adapters and
    ``agon export`` read it here)."""
    return json.loads((Path(folder) / "adapter_config.json").read_text())


@dataclass
class LoraSpec:
    """Shape and initialisation of one LoRA adapter."""

    r: int = 16
    """Rank of the update ``B @ A``."""
    alpha: int = 32
    """Scale: the update is multiplied by ``alpha / r``."""
    target_modules: str | list[str] = "all-linear"
    """Which linear layers get an adapter; ``"all-linear"`` = every projection except the LM head."""
    dropout: float = 0.0
    """LoRA dropout (0 keeps rollout and training forward passes identical)."""
    init_seed: int | None = None
    """Seed for this adapter's random init; ``None`` derives one from the adapter name."""
    init_b_std: float = 0.0
    """If > 0, ``lora_B`` starts as N(0, std) instead of zeros, so rivals differ from step 0."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further ``peft.LoraConfig`` keyword arguments (e.g. ``use_rslora``)."""

    def lora_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            target_modules=self.target_modules,
            lora_dropout=self.dropout,
            bias="none",
            task_type="CAUSAL_LM",
            **self.extra,
        )

    def seed_for(self, name: str) -> int:
        return self.init_seed if self.init_seed is not None else zlib.crc32(name.encode()) & 0x7FFFFFFF


class SharedBase:
    """Holds the base model once and any number of named LoRA adapters on it."""

    def __init__(self, model: Any, tokenizer: Any, source: str = "") -> None:
        for p in model.parameters():
            p.requires_grad_(False)
        self._base = model
        self._peft: Any = None  # the PeftModel wrapper, created with the first adapter
        self.tokenizer = tokenizer
        self.source = source
        self.specs: dict[str, LoraSpec] = {}
        self._merge = MergedWeights()

    @classmethod
    def from_source(
        cls,
        source: str = "smollm2-135m",
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> SharedBase:
        """Load a base through :func:`agon_env.agents.models.load_base`."""
        from agon_env.agents.models import load_base

        model, tok = load_base(source, dtype=dtype, device=device, seed=seed)
        return cls(model, tok, source=source)

    # -- introspection ---------------------------------------------------------------

    @property
    def model(self) -> Any:
        """The module to call: the peft wrapper once an adapter exists, else the bare base."""
        return self._peft if self._peft is not None else self._base

    @property
    def base_model(self) -> Any:
        """The underlying transformers model (shared by every adapter)."""
        return self._base

    @property
    def adapters(self) -> list[str]:
        return list(self.specs)

    @property
    def device(self) -> torch.device:
        return next(self._base.parameters()).device

    @property
    def active(self) -> str:
        """The adapter a plain forward pass uses now (``REFERENCE`` when none is active)."""
        if self._peft is None:
            return REFERENCE
        return self._active

    def _check(self, name: str) -> None:
        if name not in self.specs:
            raise KeyError(f"no adapter {name!r}; adapters: {self.adapters}")

    # -- adapters --------------------------------------------------------------------

    def add_adapter(self, name: str, spec: LoraSpec | None = None) -> None:
        """Add a fresh adapter. Duplicate names and the reserved ``REFERENCE`` are refused."""
        if name in self.specs:
            raise ValueError(f"adapter {name!r} already exists; adapters: {self.adapters}")
        if not name or name == REFERENCE or "." in name:
            raise ValueError(f"invalid adapter name {name!r}")
        spec = spec or LoraSpec()
        config = spec.lora_config()
        # Seeding inside a forked RNG keeps adapter init independent of (and invisible to)
        # the caller's global random stream.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed_for(name))
            if self._peft is None:
                from peft import get_peft_model

                training = self._base.training
                self._peft = get_peft_model(self._base, config, adapter_name=name)
                self._peft.train(training)  # a fresh wrapper starts in train mode; keep the base's
                self._active = name
            else:
                self._peft.add_adapter(name, config)
            if spec.init_b_std > 0:
                gen = torch.Generator().manual_seed(spec.seed_for(name) + 1)
                with torch.no_grad():
                    for p in self._lora_params(name, "lora_B"):
                        p.copy_(torch.randn(p.shape, generator=gen) * spec.init_b_std)
        self.specs[name] = spec
        self._all_trainable()
        # Restore whatever was active before (peft may switch on add).
        self.set_adapter(self._active)

    def _all_trainable(self) -> None:
        # peft's set_adapter freezes inactive adapters; keep every adapter trainable so an
        # optimiser built once over parameters(name) never silently stops updating.
        if self._peft is not None and self.specs:
            self._peft.base_model.set_requires_grad(self.adapters, True)

    def _lora_params(self, name: str, kind: str = "") -> Iterator[torch.nn.Parameter]:
        marker = f".{name}."
        for pname, p in self.model.named_parameters():
            if marker in pname + "." and "lora_" in pname and (not kind or f"{kind}." in pname):
                yield p

    def named_parameters(self, name: str) -> list[tuple[str, torch.nn.Parameter]]:
        """``(name, parameter)`` pairs of one adapter's trainable weights."""
        self._check(name)
        marker = f".{name}."
        return [(n, p) for n, p in self.model.named_parameters() if "lora_" in n and marker in n + "."]

    def parameters(self, name: str) -> list[torch.nn.Parameter]:
        """One adapter's trainable weights only (never the base, never another adapter)."""
        return [p for _, p in self.named_parameters(name)]

    def set_adapter(self, name: str) -> None:
        """Make ``name`` the adapter used by plain forward passes."""
        self._check(name)
        self._peft.set_adapter(name)
        self._active = name
        self._all_trainable()

    @contextmanager
    def use(self, name: str) -> Iterator[Any]:
        """Run the block with adapter ``name`` active (``REFERENCE``: adapter disabled)."""
        if name == REFERENCE:
            with self.reference() as m:
                yield m
            return
        previous = self.active
        self.set_adapter(name)
        try:
            yield self.model
        finally:
            if previous != REFERENCE:
                self.set_adapter(previous)

    @contextmanager
    def sampling(self, name: str) -> Iterator[Any]:
        """Run the block to *sample* from adapter ``name`` (no gradients): merged into the
        base weights when that is exact (:mod:`agon_env.agents.merge`), else as :meth:`use`."""
        if name != REFERENCE and self._peft is not None:
            with self._merge.merged(self._peft, name) as merged:
                if merged:
                    yield self.model
                    return
        with self.use(name) as model:
            yield model

    @contextmanager
    def reference(self) -> Iterator[Any]:
        """Run the block with every adapter disabled: the frozen base as reference policy."""
        if self._peft is None:
            yield self._base
            return
        with self._peft.disable_adapter():
            yield self._peft

    # -- state -----------------------------------------------------------------------

    def adapter_state_dict(self, name: str) -> dict[str, torch.Tensor]:
        """A detached copy of one adapter's weights, keys in peft's saved-file format."""
        self._check(name)
        from peft import get_peft_model_state_dict

        # save_embedding_layers=False: we never target embeddings, and "auto" probes the hub.
        sd = get_peft_model_state_dict(self._peft, adapter_name=name, save_embedding_layers=False)
        return {k: v.detach().clone() for k, v in sd.items()}

    def load_adapter_state_dict(self, name: str, state: dict[str, torch.Tensor]) -> None:
        """Overwrite one adapter's weights in place; a missing or unexpected key is an error."""
        self._check(name)
        expected = set(self.adapter_state_dict(name))
        got = set(state)
        if expected != got:
            missing, extra = sorted(expected - got)[:3], sorted(got - expected)[:3]
            raise ValueError(f"adapter {name!r} state mismatch: missing {missing}, unexpected {extra}")
        from peft import set_peft_model_state_dict

        with torch.no_grad():
            set_peft_model_state_dict(self._peft, state, adapter_name=name)

    def save(self, name: str, folder: str | os.PathLike[str]) -> Path:
        """Write one adapter as a standard peft folder (loadable by peft and vLLM), atomically."""
        from safetensors.torch import save_file

        self._check(name)
        target = Path(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        tmp.chmod(0o755)  # mkdtemp is private; a saved adapter is meant to be read by others
        try:
            config = copy.deepcopy(self._peft.peft_config[name])
            if self.source:
                config.base_model_name_or_path = self.source
            # peft keeps target_modules (and other module lists) as sets and writes them in set
            # order, which follows PYTHONHASHSEED: sorted, the same adapter writes the same bytes
            # in every process.
            for key, value in vars(config).items():
                if isinstance(value, (set, frozenset)):
                    setattr(config, key, sorted(value))
            config.save_pretrained(str(tmp))
            state = {k: v.contiguous() for k, v in self.adapter_state_dict(name).items()}
            save_file(state, str(tmp / ADAPTER_WEIGHTS))
            (tmp / "agon_lora_spec.json").write_text(json.dumps(asdict(self.specs[name]), indent=1))
            if target.exists():
                old = target.with_name(f".{target.name}.old")
                shutil.rmtree(old, ignore_errors=True)
                os.replace(target, old)
                os.replace(tmp, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target

    def load(self, name: str, folder: str | os.PathLike[str]) -> None:
        """Load an adapter folder written by :meth:`save` (or peft) under ``name``.

        Creates the adapter when it does not exist yet; otherwise overwrites its weights.
        """
        from safetensors.torch import load_file

        folder = Path(folder)
        weights = folder / ADAPTER_WEIGHTS
        if not weights.is_file():
            raise FileNotFoundError(f"{folder} holds no {ADAPTER_WEIGHTS}")
        if name not in self.specs:
            spec_file = folder / "agon_lora_spec.json"
            if spec_file.is_file():
                spec = LoraSpec(**json.loads(spec_file.read_text()))
            else:
                cfg = read_adapter_config(folder)
                spec = LoraSpec(
                    r=cfg["r"],
                    alpha=cfg["lora_alpha"],
                    target_modules=cfg["target_modules"],
                    dropout=cfg.get("lora_dropout", 0.0),
                )
            self.add_adapter(name, spec)
        self.load_adapter_state_dict(name, load_file(str(weights), device=str(self.device)))
