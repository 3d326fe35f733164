"""Turning a config into the objects a run needs: the env, the shared base, the agents.

Generation backends are a registry (``BACKENDS``), so ``--backend vllm`` is a lookup,
not a branch. A backend may expose ``sync(adapter)``; the trainer calls it after every
update so a backend that keeps its own copy of the adapters (vLLM) serves new weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from agon_env.algorithms.registry import AlgorithmPlugin
from agon_env.config import TrainConfig
from agon_env.errors import USER_ERRORS, UserError
from agon_env.seeding import derive_seed


class SetupError(UserError, ValueError):
    """The run cannot be built as configured (model, env id, task keywords, data path); one line."""


def _message(exc: BaseException) -> str:
    # KeyError's str() is its repr; the registry's messages are its first argument.
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(str(text).split())


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(cfg: TrainConfig) -> str:
    """The device of ``cfg.model.device`` (:func:`agon_env.agents.models.resolve_device`)."""
    from agon_env.agents.models import resolve_device as resolve

    return resolve(cfg.model.device)


def resolve_dtype(cfg: TrainConfig) -> torch.dtype:
    # fp32 on CPU: bf16 matmuls run ~300x slower than fp32 on the cores we target.
    if cfg.model.dtype == "auto":
        return torch.bfloat16 if resolve_device(cfg) == "cuda" else torch.float32
    return DTYPES[cfg.model.dtype]


def build_env(cfg: TrainConfig, plugin: AlgorithmPlugin) -> Any:
    """The training env: the task's ``train`` split, refused if it shares a prompt with the test split."""

    try:
        env = _make_env(cfg, plugin)
        check_training_pool(cfg.env.id, cfg.env.kwargs, env.task)
    except USER_ERRORS as exc:
        raise SetupError(f"env {cfg.env.id} with kwargs {cfg.env.kwargs}: {_message(exc)}") from exc
    return env


_CLEAN_POOLS: set[str] = set()
"""Configs whose pool was checked in this process: building arith's two 10 000-problem splits
takes a second or two, and tests build the same config many times."""


def check_training_pool(env_id: str, kwargs: dict[str, Any], pool: Any) -> None:
    """Raise ``ValueError`` if ``pool`` (the task a run trains on) shares a normalised prompt with
    the test split the same task kwargs build. A task without ``split=`` has no test split to
    compare with: it trains on all its problems, and a line says so."""
    import agon_env
    from agon_env.envs.tasks.base import shared_prompts

    if not agon_env.spec(env_id).takes("split"):
        print(
            f"agon train: {env_id} takes no split=, so nothing is held out of training: it trains on all "
            f"{len(pool)} problems and has no held-out check; give its constructor a split= argument "
            "(agon_env.envs.tasks.base.carve splits by content, docs/envs.md) to hold problems out"
        )
        return
    key = repr((env_id, sorted(kwargs.items())))
    if key in _CLEAN_POOLS:
        return
    test = getattr(agon_env.make(env_id, **{**kwargs, "split": "test"}), "task", None)
    shared = [] if test is None else shared_prompts(pool, test)
    if shared:
        example = " ".join(shared[0].split())[:80]
        raise ValueError(
            f"the training pool ({len(pool)} problems, split={kwargs.get('split', 'train')!r}) holds "
            f"{len(shared)} prompts of the test split (e.g. {example!r}): train on the train split "
            f"(--env.kwargs split=train, or leave split out); a task that takes split= must build "
            f"disjoint splits (agon_env.envs.tasks.base.carve does it by content)"
        )
    _CLEAN_POOLS.add(key)


def _make_env(cfg: TrainConfig, plugin: AlgorithmPlugin) -> Any:
    import agon_env.registry

    return agon_env.make(
        cfg.env.id,
        mode=plugin.env_mode,
        reward_scheme=plugin.reward_scheme,
        **cfg.env.env_keywords(),
        **agon_env.registry.with_split(cfg.env.id, cfg.env.kwargs, "train"),
    )


def build_base(cfg: TrainConfig, plugin: AlgorithmPlugin) -> Any:
    """One frozen base with one LoRA adapter per seat of the plugin."""
    from agon_env.agents import LoraSpec, SharedBase

    try:
        base = SharedBase.from_source(
            cfg.model.name,
            dtype=resolve_dtype(cfg),
            device=resolve_device(cfg),
            seed=derive_seed(cfg.seed, "base"),
        )
    except (*USER_ERRORS, OSError) as exc:
        raise SetupError(f"model {cfg.model.name}: {_message(exc)}") from exc
    for name in plugin.adapters:
        # Seeded per adapter: the rivals' A matrices differ from the start.
        spec = LoraSpec(
            r=cfg.model.lora_r,
            alpha=cfg.model.lora_alpha,
            init_seed=derive_seed(cfg.seed, "lora", name),
            init_b_std=cfg.model.lora_b_init_std,
        )
        base.add_adapter(name, spec)
    if cfg.model.gradient_checkpointing:
        # Non-reentrant: the frozen base's inputs need no grad for the adapters' to flow.
        base.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return base


def _hf(cfg: TrainConfig, base: Any) -> Any:
    from agon_env.agents import HFBackend

    return HFBackend(base, prefix_attention=cfg.model.prefix_attention)


def _vllm(cfg: TrainConfig, base: Any) -> Any:
    from agon_env.agents import VLLMBackend

    dtype = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}[
        resolve_dtype(cfg)
    ]
    return VLLMBackend(
        base,
        gpu_memory_utilization=cfg.model.gpu_memory_utilization,
        dtype=dtype,
        seed=cfg.seed,
        max_model_len=cfg.model.max_seq_len,
    )


BACKENDS: dict[str, Callable[[TrainConfig, Any], Any]] = {"hf": _hf, "vllm": _vllm}
"""Generation backends by name: ``(config, shared base) -> backend``."""


def build_agents(
    cfg: TrainConfig, plugin: AlgorithmPlugin, base: Any, backend: Any, task: Any
) -> dict[str, Any]:
    """One LLM agent per seat, all sharing ``backend``, each sampling as ``cfg.sampling_of`` its seat."""
    from agon_env.agents import LLMAgent
    from agon_env.agents.prompts import PromptFamilyError, role_prompts

    try:
        prompts = role_prompts(task, cfg.prompts)
    except PromptFamilyError as exc:
        raise SetupError(str(exc)) from exc
    agents = {
        name: LLMAgent(
            name=name,
            base=base,
            adapter=name,
            backend=backend,
            sampling=cfg.sampling_of(name),
            prompts=prompts,
            template_kwargs=cfg.model.chat_template_kwargs,
        )
        for name in plugin.adapters
    }
    if cfg.env.exchange == "latent":  # the seats record their drafts and read each other's caches
        from agon_env.agents.latent import latent_agents

        return latent_agents(agents, cfg.latent)
    return agents
