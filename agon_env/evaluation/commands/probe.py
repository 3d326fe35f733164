"""``agon probe``: the generation–verification gap of a model on a task, before any training.

    agon probe                                               # SmolLM2-135M on the default task
    agon probe --env agon/arith-v0 --env-kwargs difficulty=2.5 --problems 100 --samples 4
    agon probe --run runs/agon-seed0 --adapter agent_a       # a trained adapter reads its own drafts
    agon probe --model tiny --env agon/arith-v0 --problems 4 # seconds, random weights (CI)

The settings are :class:`ProbeConfig` (a dataclass, parsed by tyro: ``agon probe --help``
shows each field's docstring and default); what is measured is :mod:`agon_env.evaluation.probe`.
Writes ``probe.json`` (every outcome, the rates and the verdict) and prints a table.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agon_env.command import CommandArgs, run_command
from agon_env.errors import InputError
from agon_env.json_value import JSONRecord, JSONValue

if TYPE_CHECKING:
    from agon_env.agents.llm_agent import LLMAgent
    from agon_env.envs.tasks.base import Task


@dataclass
class ProbeConfig(CommandArgs):
    """``agon probe``: does the model check better than it solves on this task?"""

    env: str | None = None
    """Registered env id (any ``agon_env.make``-able task); None: the run's, else ``agon/arith-v0``."""
    env_kwargs: list[str] = field(default_factory=list)
    """Task and env keywords, ``KEY=VALUE ...`` (values are YAML: ``difficulty=2.5``,
    ``exchange=redacted``). With ``--run`` they override the run's own task keywords (when the env
    is the run's) and its exchange channel."""
    model: str = "smollm2-135m"
    """Base model alias or path (ignored with ``--run``: the run's own base)."""
    run: str | None = None
    """A run folder from ``agon train``: probe one of its adapters instead of the base."""
    adapter: str = "agent_a"
    """With ``--run``: the adapter that drafts and reads."""
    split: str = "validation"
    """Problems to probe on: validation by default, so a study's test split stays untouched."""
    problems: int = 50
    """Distinct problems (a seeded sample of the split)."""
    samples: int = 4
    """Drafts per problem; each is read once, so ``problems × samples`` drafts and readings."""
    seed: int = 0
    """Seeds the problem sample and every sampling stream."""
    temperature: float | None = None
    """Sampling temperature of drafts and readings (None: the run's, else the default run's 0.7)."""
    max_new_tokens: int | None = None
    """Token budget per completion (None: the run's, else the default run's 80)."""
    few_shot: bool | None = None
    """Show the prompt family's worked examples (None: as the run trained; on by default)."""
    prompt_family: str | None = None
    """Prompt family (None: the run's, else the task's own)."""
    device: str = "auto"
    """``cpu``, ``cuda`` or ``auto`` (CUDA when this machine has it), as ``agon eval`` reads it."""
    backend: str = "hf"
    """What generates: ``hf``, ``vllm`` or ``auto`` (:data:`agon_env.runtime.BACKENDS`), as
    ``agon eval --backend`` reads it."""
    out: str = "probe.json"
    """Where the JSON result goes."""


def _agent(cfg: ProbeConfig, task: Task) -> LLMAgent:
    """The drafting-and-reading policy: the base with adapters off, or a run's adapter, with the
    run's settings (the default run's for the base) after this command's overrides."""
    from dataclasses import replace

    from agon_env.config import TrainConfig
    from agon_env.evaluation.runs import PolicyLoader, settings_for
    from agon_env.resolved import settle
    from agon_env.run_folder import load_resolved

    run = load_resolved(cfg.run) if cfg.run else settle(TrainConfig())
    prompts = {"few_shot": cfg.few_shot, "family": cfg.prompt_family}
    chosen = replace(run.config.prompts, **{k: v for k, v in prompts.items() if v is not None})
    run = replace(run, config=replace(run.config, prompts=chosen))
    settings = settings_for(run, task, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    from agon_env.runtime import pick_backend

    loader = PolicyLoader(
        cfg.device, pick_backend(cfg.backend, cfg.model if cfg.run is None else run.config.model.name)
    )
    if cfg.run is None:
        return loader.base_policies(cfg.model, settings).base
    policies = loader.run_policies(cfg.run, settings)
    if cfg.adapter not in policies.adapters:
        raise InputError(f"--adapter {cfg.adapter!r}: {cfg.run} has {sorted(policies.adapters)}")
    return policies.adapters[cfg.adapter]


def probe_env(cfg: ProbeConfig) -> tuple[str, dict[str, Any]]:
    """The env id and keywords to probe. With ``--run``, as ``agon eval`` reads a run: its task
    keywords when the env is its own, and its env options (the exchange channel it trained on, so
    its adapter reads drafts as it learned to, and ``lam``, ``gamma``, ``max_text_length``, ...);
    ``--env-kwargs`` override them."""
    from agon_env.config import EnvConfig, parse_assignments
    from agon_env.evaluation.runs import run_task_kwargs
    from agon_env.run_folder import load_resolved

    given = parse_assignments(cfg.env_kwargs, "--env-kwargs")
    if cfg.run is None:
        return cfg.env or EnvConfig().id, given
    run = load_resolved(cfg.run)
    env_id = cfg.env or run.env_id
    own = {**run.reader_options(), "exchange": run.exchange}  # lam, gamma, max_text_length, ...
    return env_id, {**run_task_kwargs(run.config, env_id), **own, **given}


def _base_of(cfg: ProbeConfig) -> str:
    """The base model the probe loads: ``--model``, or the run's own with ``--run``."""
    from agon_env.run_folder import load_resolved

    return load_resolved(cfg.run).config.model.name if cfg.run else cfg.model


def probe(cfg: ProbeConfig) -> JSONRecord:
    """Run the probe of ``cfg`` and return the JSON-ready result (also written to ``cfg.out``)."""
    from agon_env.agents.models import check_source
    from agon_env.envs.exchange import CHANNELS, DEFAULT
    from agon_env.evaluation.checks import check_sampling
    from agon_env.evaluation.probe import analyse, outcomes_to_dicts, run_probe
    from agon_env.evaluation.splits import build_task, distinct_sample
    from agon_env.options import ENV_KWARGS
    from agon_env.registry import check_keywords, import_modules, make
    from agon_env.run_folder import RunFolderError, check_file_writable

    check_sampling(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    for flag, value in (("--problems", cfg.problems), ("--samples", cfg.samples)):
        if value < 1:
            raise InputError(f"{flag} {value}: the probe needs at least 1")
    check_file_writable(cfg.out, "--out")  # before any model loads or any sample is drawn
    import_modules(cfg.imports)
    start = time.perf_counter()
    env_id, kwargs = probe_env(cfg)
    env_kwargs = {k: v for k, v in kwargs.items() if k in ENV_KWARGS and k != "mode"}
    channel = CHANNELS.get(env_kwargs.get("exchange", DEFAULT))
    if channel is not None and channel.cache:  # its reader would read no draft at all here
        raise InputError(
            f"exchange={channel.name} is not probed: the probe's reader is a text agent, with no draft "
            "cache to read; probe summary, redacted or trace (--env-kwargs exchange=summary)"
        )
    check_keywords(env_id, kwargs)  # dificulty=3: "did you mean 'difficulty'?", as make says it
    check_source(_base_of(cfg))  # before the task is built and its problems drawn
    task = build_task(env_id, kwargs, cfg.split)
    indices = distinct_sample(task, cfg.problems, cfg.seed, "probe")
    agent = _agent(cfg, task)
    outcomes = run_probe(
        make(env_id, task=task, **env_kwargs, mode="solo"),
        make(env_id, task=task, **env_kwargs, mode="challenge"),
        agent,
        agent,
        indices,
        cfg.samples,
        cfg.seed,
    )
    result = {
        "config": asdict(cfg),
        "env": {"id": env_id, "kwargs": kwargs},
        "task": getattr(task, "name", type(task).__name__),
        "problem_ids": [str(task[i].id) for i in indices],
        **analyse(outcomes),
        "outcomes": outcomes_to_dicts(outcomes),
        "seconds": time.perf_counter() - start,
    }
    try:
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.out).write_text(json.dumps(result, indent=1) + "\n")
    except OSError as exc:  # the disk filled or turned read-only while probing
        raise RunFolderError(f"--out: cannot write {cfg.out} ({exc.strerror or exc})") from None
    return result


def env_of(result: Mapping[str, JSONValue]) -> tuple[str, list[str]]:
    """The env a probe result read: its id and ``KEY=VALUE`` keywords (results written before
    ``env`` was recorded have only the command's flags, which were then the whole env)."""
    if "env" in result:
        return result["env"]["id"], [f"{k}={v}" for k, v in result["env"]["kwargs"].items()]
    return result["config"]["env"], list(result["config"]["env_kwargs"])


def print_probe(result: Mapping[str, JSONValue]) -> None:
    from rich.console import Console
    from rich.table import Table

    from agon_env.evaluation.probe import table_rows

    c = result["config"]
    who = f"{c['run']}:{c['adapter']}" if c["run"] else c["model"]
    env, kwargs = env_of(result)
    table = Table(
        title=f"probe: {who} on {' '.join([env, *kwargs])} — {result['problems']} {c['split']} "
        f"problems × {c['samples']} drafts ({result['seconds']:.0f} s)"
    )
    for col in ("quantity", "value", f"{round(100 * result['confidence'])}% CI"):
        table.add_column(col, justify="left" if col == "quantity" else "right")
    for row in table_rows(result):
        table.add_row(*row)
    console = Console()
    Console(width=None if console.is_terminal else 120).print(table)
    print(f"verdict: {result['verdict']}")


def run_probe_cli(argv: list[str]) -> int:
    """``agon probe ARGV``."""
    return run_command(ProbeConfig, argv, "agon probe", _probe_and_print)


def _probe_and_print(cfg: ProbeConfig) -> None:
    result = probe(cfg)
    print_probe(result)
    print(f"agon probe: wrote {cfg.out}", file=sys.stderr)
