"""A resolved run, loaded on this machine: the one way a run becomes agents.

Training, ``agon eval``, ``agon probe``, ``agon answer``, ``agon serve`` and ``agon export`` all
take a run's pieces from here, so they cannot disagree on them:

* **the dtype** a base loads in (:data:`DTYPES`, through :func:`agon_env.resolved.dtype_on`);
* **the adapters** a run folder holds (:func:`adapter_folders`: ``adapters/<name>/`` peft folders,
  an export's top level; else, for a run stopped early, its checkpoint's state dicts through
  :func:`read_checkpoint`, the one checked reader of ``checkpoint.pt``);
* **the backend** that generates (:data:`BACKENDS`: ``hf`` or ``vllm``; ``auto`` picks vLLM where it
  imports and the model is one it can load). ``agon train --model.backend`` and the serving
  commands' ``--backend`` (``--engine`` kept as an alias) name the same table;
* **vLLM's limits**, taken from the run (:func:`vllm_options`): ``max_model_len`` is the run's
  ``model.max_seq_len`` (within the model's window), ``gpu_memory_utilization`` the run's, and on
  CPU the KV cache is sized for ``max_model_len`` x the run's batch (``sampling.max_batch_size``),
  not a share of host memory (vLLM's CPU worker otherwise reserves ``gpu_memory_utilization`` of
  the machine: 9.4 GiB for a 135M model).

:class:`Runtime` holds one base per (model, dtype) and one backend per base, so several runs
evaluated together share them. It sits below evaluation and serving and above the agents.
"""

from __future__ import annotations

import errno
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agon_env.config import TrainConfig
from agon_env.errors import BackendError
from agon_env.resolved import ResolvedRun, dtype_on
from agon_env.run_folder import ADAPTERS, CHECKPOINT, RunFolder, RunFolderError, load_resolved

if TYPE_CHECKING:
    import torch

    from agon_env.agents.adapters import SharedBase
    from agon_env.agents.llm_agent import LLMAgent
    from agon_env.agents.prompt_families import RolePrompts
    from agon_env.agents.protocol import Backend

DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes a base loads in (``model.dtype``, besides ``auto``); torch's by the same name."""


def torch_dtype(name: str) -> torch.dtype:
    """torch's dtype for one of :data:`DTYPES`."""
    import torch

    return getattr(torch, name)


# -- the run's adapters --------------------------------------------------------------


def adapter_folders(run_dir: str | Path) -> dict[str, Path]:
    """Adapter name -> its peft folder: ``adapters/<name>/`` (an export's top level) holding
    weights. A dot-folder is a save cut off mid-way (``.agent_a.old``), not an adapter."""
    return _folders(RunFolder(Path(run_dir)).adapters)


def _folders(folder: Path) -> dict[str, Path]:
    from agon_env.agents.adapters import ADAPTER_WEIGHTS

    if not folder.is_dir():
        return {}
    return {
        sub.name: sub
        for sub in sorted(folder.iterdir())
        if not sub.name.startswith(".") and (sub / ADAPTER_WEIGHTS).is_file()
    }


def adapter_sources(run_dir: str | Path) -> dict[str, Path | dict[str, torch.Tensor]]:
    """Adapter name -> its peft folder, or -> its state dict from the checkpoint."""
    folder = RunFolder(Path(run_dir))
    return _sources(_folders(folder.adapters), folder.checkpoint)


def _sources(folders: dict[str, Path], checkpoint: Path) -> dict[str, Path | dict[str, torch.Tensor]]:
    if folders:
        return dict(folders)
    if checkpoint.is_file():
        return dict(read_checkpoint(checkpoint, needs=("adapters",))["adapters"] or {})
    raise RunFolderError(
        f"{checkpoint.parent} has neither {ADAPTERS}/<name>/ nor {CHECKPOINT}: nothing to load"
    )


@dataclass(frozen=True)
class RunOnDisk:
    """A run folder read once: its resolved run, its name, its adapters, where its evaluation goes."""

    path: Path
    """The folder, as it was named (``agon eval``'s label for it)."""
    run: ResolvedRun
    name: str
    """The run's name (:attr:`agon_env.run_folder.RunFolder.run_name`: an export keeps its run's)."""
    sources: dict[str, Path | dict[str, torch.Tensor]]
    """Adapter name -> its peft folder, or -> its state dict from the checkpoint (:func:`adapter_sources`)."""
    eval_dir: Path
    """Where ``agon eval RUN`` writes by default."""

    @classmethod
    def read(cls, run_dir: str | Path) -> RunOnDisk:
        folder = RunFolder(Path(run_dir))
        run = load_resolved(folder.path)
        name, adapters, checkpoint, eval_dir = (
            folder.run_name,
            folder.adapters,
            folder.checkpoint,
            folder.eval_dir,
        )
        return cls(folder.path, run, name, _sources(_folders(adapters), checkpoint), eval_dir)

    @property
    def adapter_names(self) -> list[str]:
        return list(self.sources)


def read_checkpoint(path: Path, needs: tuple[str, ...] = ("step",)) -> dict[str, Any]:
    """The state in ``path``, holding ``needs``; one line naming the file and what to do when it
    cannot be read."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise RunFolderError(
                f"cannot read {path} ({exc.strerror or exc}); check the file's permissions"
            ) from None
        # torch's zip reader says EINVAL ("Invalid argument") of a file cut short: not permissions.
        raise RunFolderError(
            f"{path} is truncated or corrupt ({exc.strerror or exc}): it was cut short or overwritten "
            "outside agon train. Restore it from a copy, or start the run again under a new --out-dir"
        ) from None
    except Exception as exc:  # torch's unpickler raises anything from RuntimeError to UnpicklingError
        raise RunFolderError(
            f"{path} is not a readable checkpoint ({type(exc).__name__}: {str(exc).splitlines()[0][:120]}): "
            "it was cut short or overwritten outside agon train. Restore it from a copy, or start the run "
            "again under a new --out-dir"
        ) from None
    if not isinstance(state, dict) or not set(needs) <= state.keys():
        raise RunFolderError(
            f"{path} holds no agon train checkpoint; restore it from a copy, or start the run again "
            "under a new --out-dir"
        )
    return state


# -- backends ------------------------------------------------------------------------


def model_window(base: SharedBase) -> int | None:
    """The model's context window in tokens (``None``: it sets none)."""
    return getattr(base.base_model.config, "max_position_embeddings", None)


def kv_bytes_per_token(base: SharedBase, dtype: str) -> int:
    """What one token's keys and values take in every layer."""
    c = base.base_model.config
    heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 2 * c.num_hidden_layers * heads * head_dim * torch_dtype(dtype).itemsize


def vllm_options(run: ResolvedRun, base: SharedBase, device: str) -> dict[str, Any]:
    """The vLLM engine's keywords from the run: its window, memory share, dtype and seed; on CPU a
    KV cache for ``max_model_len`` x the run's batch (see the module docstring)."""
    model = run.config.model
    dtype = dtype_on(model.dtype, device)
    window = min(model.max_seq_len, model_window(base) or math.inf)
    options: dict[str, Any] = {
        "max_model_len": int(window),
        "gpu_memory_utilization": model.gpu_memory_utilization,
        "dtype": dtype,
        "seed": run.config.seed,
    }
    if device == "cpu":
        batch = run.config.sampling.max_batch_size
        options["kv_cache_memory_bytes"] = kv_bytes_per_token(base, dtype) * int(window) * batch
    return options


KEEP_MERGED = 2
"""Adapters whose merged weights an HF backend of :class:`Runtime` keeps between calls (a pair's:
:class:`~agon_env.agents.merge.MergeStore`). Evaluation and serving never change the weights, so a
merge made once serves every later call; training keeps none (its update would hold that memory)."""


def _hf(run: ResolvedRun, base: SharedBase, device: str, continuous: bool, keep_merged: int = 0) -> Backend:
    from agon_env.agents import HFBackend

    return HFBackend(base, keep_merged=keep_merged)


def _vllm(run: ResolvedRun, base: SharedBase, device: str, continuous: bool, keep_merged: int = 0) -> Backend:
    from agon_env.agents.vllm_async import AsyncVLLMBackend
    from agon_env.agents.vllm_backend import VLLMBackend

    engine = AsyncVLLMBackend if continuous else VLLMBackend
    return engine(base, **vllm_options(run, base, device))


BACKENDS: dict[str, Callable[..., Backend]] = {"hf": _hf, "vllm": _vllm}
"""Generation backends by name: ``(resolved run, shared base, device, continuous, keep_merged=0) ->
backend`` (``continuous``: vLLM's async engine, which batches calls from several threads itself;
``keep_merged``: :data:`KEEP_MERGED`, HF's; vLLM keeps its adapters apart from the base anyway)."""


def pick_backend(name: str, model: str) -> str:
    """A name of :data:`BACKENDS`; ``auto``: vLLM where it imports and the model is a folder or Hub
    id it can load, else HF."""
    if name != "auto" and name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")
    if name != "auto":
        return name
    from agon_env.agents.models import resolve_source
    from agon_env.agents.vllm_backend import vllm_available

    return "vllm" if resolve_source(model) != "tiny" and vllm_available() else "hf"


# -- a run, loaded --------------------------------------------------------------------


class Runtime:
    """Runs loaded on this machine: one base per (model, dtype) on ``device`` (``auto``: CUDA where
    this machine has it), one ``backend`` per base, each run's adapters on it."""

    def __init__(self, device: str = "auto", backend: str = "hf", continuous: bool = False) -> None:
        from agon_env.agents.models import resolve_device

        self.device = resolve_device(device)
        self.backend_name = backend
        self.continuous = continuous and backend == "vllm"
        self._bases: dict[tuple[str, str], SharedBase] = {}
        self._backends: dict[int, Backend] = {}
        self._windows: dict[int, int] = {}

    def dtype(self, cfg: TrainConfig) -> str:
        """The dtype a run's base loads in here."""
        return dtype_on(cfg.model.dtype, self.device)

    def base(self, model: str, dtype: str = "float32") -> SharedBase:
        if (model, dtype) not in self._bases:
            from agon_env.agents.adapters import SharedBase

            base = SharedBase.from_source(model, dtype=torch_dtype(dtype), device=self.device)
            self._bases[model, dtype] = base
        return self._bases[model, dtype]

    def load_adapters(
        self,
        base: SharedBase,
        sources: Mapping[str, Path | dict[str, torch.Tensor]],
        cfg: TrainConfig,
        prefix: str = "",
    ) -> dict[str, tuple[str, Path | dict[str, torch.Tensor]]]:
        """Each adapter of ``sources`` (:func:`adapter_sources`) on ``base`` as ``prefix + name``:
        name -> (that, its source)."""
        from agon_env.agents.adapters import LoraSpec

        loaded = {}
        for name, source in sources.items():
            unique = f"{prefix}{name}"
            if unique not in base.adapters:
                if isinstance(source, Path):
                    base.load(unique, source)
                else:
                    base.add_adapter(unique, LoraSpec(r=cfg.model.lora_r, alpha=cfg.model.lora_alpha))
                    base.load_adapter_state_dict(unique, source)
                self._synced(base, unique)
            loaded[name] = (unique, source)
        return loaded

    def _synced(self, base: SharedBase, adapter: str) -> None:
        backend = self._backends.get(id(base))
        sync = getattr(backend, "sync", None)
        if callable(sync):  # a backend with its own copy of the adapters (vLLM) learns the new one
            sync(adapter)

    def backend(self, base: SharedBase, run: ResolvedRun) -> Backend:
        """The base's backend, started on first use with the first run's limits."""
        if id(base) not in self._backends:
            make = BACKENDS[self.backend_name]
            self._backends[id(base)] = make(run, base, self.device, self.continuous, keep_merged=KEEP_MERGED)
            if self.backend_name == "vllm":
                self._windows[id(base)] = vllm_options(run, base, self.device)["max_model_len"]
        return self._backends[id(base)]

    def agent(
        self, name: str, base: SharedBase, adapter: str, run: ResolvedRun, prompts: RolePrompts
    ) -> LLMAgent:
        """Policy ``name`` (the run's adapter name, or ``base``) over ``adapter`` on ``base``,
        sampling as the run resolved it."""
        from agon_env.agents import LLMAgent

        return LLMAgent(
            name=name,
            base=base,
            adapter=adapter,
            backend=self.backend(base, run),
            sampling=run.policy_sampling(name),
            prompts=prompts,
            template_kwargs=run.config.model.chat_template_kwargs,
        )

    def engine_window(self, base: SharedBase) -> int | None:
        """The backend's own context limit where it sets one (vLLM's ``max_model_len``)."""
        return self._windows.get(id(base))

    def close(self) -> None:
        """Stop the backends that run in processes of their own (vLLM's engine core)."""
        for backend in self._backends.values():
            close = getattr(backend, "close", None)
            if callable(close):
                close()
