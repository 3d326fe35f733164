"""Turning a resolved run (:class:`~agon_env.resolved.ResolvedRun`) into the objects it needs:
the env, the shared base, the backend, the agents. Each reads the run's resolved fields
(seats, env keywords, channel, per-policy sampling, device, dtype) and derives none.

Generation backends are :data:`agon_env.runtime.BACKENDS` (the table every command loads a run
through), so ``--model.backend vllm`` is a lookup, not a branch. A backend may expose
``sync(adapter)``; the trainer calls it after every update so a backend that keeps its own copy
of the adapters (vLLM) serves new weights.
"""

from __future__ import annotations

from typing import Any

from agon_env.agents.adapters import SharedBase
from agon_env.agents.protocol import Agent, Backend
from agon_env.algorithms.errors import SetupError
from agon_env.envs.exchange import CHANNELS
from agon_env.envs.tasks.base import Task
from agon_env.episodes import TaskEnv
from agon_env.errors import USER_ERRORS
from agon_env.resolved import ResolvedRun
from agon_env.runtime import torch_dtype
from agon_env.seeding import derive_seed


def _message(exc: BaseException) -> str:
    # KeyError's str() is its repr; the registry's messages are its first argument.
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(str(text).split())


def build_env(run: ResolvedRun) -> TaskEnv:
    """The training env: the task's ``train`` split, refused if it shares a prompt with the test split."""
    import agon_env.registry

    try:
        kwargs = agon_env.registry.with_split(run.env_id, run.task_kwargs, "train")
        env = agon_env.make(run.env_id, **run.env_keywords(), **kwargs)
        check_training_pool(run.env_id, run.task_kwargs, env.task)
    except USER_ERRORS as exc:
        raise SetupError(f"env {run.env_id} with kwargs {run.task_kwargs}: {_message(exc)}") from exc
    return env


_CLEAN_POOLS: set[str] = set()
"""Configs whose pool was checked in this process: building arith's two 10 000-problem splits
takes a second or two, and tests build the same config many times."""


def check_training_pool(env_id: str, kwargs: dict[str, Any], pool: Task) -> None:
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


def build_base(run: ResolvedRun) -> SharedBase:
    """One frozen base with one LoRA adapter per seat of the run's algorithm."""
    from agon_env.agents import LoraSpec, SharedBase

    cfg = run.config
    try:
        base = SharedBase.from_source(
            cfg.model.name,
            dtype=torch_dtype(run.dtype),
            device=run.device,
            seed=derive_seed(cfg.seed, "base"),
        )
    except (*USER_ERRORS, OSError) as exc:
        raise SetupError(f"model {cfg.model.name}: {_message(exc)}") from exc
    for name in run.adapters:
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


def build_agents(run: ResolvedRun, base: SharedBase, backend: Backend, task: Task) -> dict[str, Agent]:
    """One LLM agent per seat, all sharing ``backend``, each sampling as the run resolved for it;
    on a channel that hands over the draft's cache, the seats record drafts and read caches."""
    from agon_env.agents import LLMAgent
    from agon_env.agents.prompts import PromptFamilyError, role_prompts

    cfg = run.config
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
            sampling=run.sampling[name],
            prompts=prompts,
            template_kwargs=cfg.model.chat_template_kwargs,
        )
        for name in run.adapters
    }
    if CHANNELS[run.env.exchange].cache:
        from agon_env.agents.latent import latent_agents

        return latent_agents(agents, cfg.latent)
    return agents
