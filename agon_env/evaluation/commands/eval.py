"""``agon eval`` and ``agon plot``: :class:`EvalArgs` and :class:`PlotArgs`, parsed by tyro.

    agon eval runs/agon-seed0                  # every method on the run's task
    agon eval                                          # the untrained base (few-/zero-shot, MoA)
    agon eval runs/a runs/b --seeds 0 1 2              # two runs, three sampling seeds each
    agon eval --data my.jsonl --question-field q --answer-field a   # any local dataset
    agon plot runs/agon-seed0 runs/grpo-seed0 --out plots

Heavy imports (torch, transformers, matplotlib) happen only when a command runs.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import tyro

from agon_env.agents.protocol import SamplingParams
from agon_env.command import CommandArgs, run_command
from agon_env.config import ModelConfig, TrainConfig, parse_assignments
from agon_env.errors import InputError
from agon_env.evaluation.methods import DEFAULT_METHODS
from agon_env.json_value import JSONRecord


def default_cache_dir() -> Path:
    """``$AGON_EVAL_CACHE_DIR`` or ``~/.cache/agon_env/eval-samples``."""
    env = os.environ.get("AGON_EVAL_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "agon_env" / "eval-samples"


@dataclass
class EvalArgs(CommandArgs):
    """Evaluate trained adapters (run folders) or the untrained base on a task's test split:
    standalone, cascade (direction chosen on validation), MoA, self-cascade and the base with and
    without the worked examples (base-few-shot, base-zero-shot). Writes eval.json and eval.md (a
    Table-1-style report)."""

    runs: Annotated[list[str], tyro.conf.Positional, tyro.conf.arg(metavar="RUN ...")] = field(
        default_factory=list
    )
    """Run folders from ``agon train``; none = the untrained base."""
    model: str | None = None
    """Base model (None: the run's, else the default run's)."""
    env: str | None = None
    """Registered env id (None: the run's, else the default run's)."""
    env_kwarg: Annotated[list[str], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="KEY=VALUE")] = field(
        default_factory=list
    )
    """Task keyword on top of the run's (values are YAML), repeatable."""
    data: str | None = None
    """A local JSONL/JSON/parquet file: evaluates agon/math-v0 on it."""
    question_field: str = "question"
    """With ``--data``: the question column."""
    answer_field: str = "answer"
    """With ``--data``: the answer column."""
    split: str = "test"
    """Task split to report on, when the task has splits."""
    allow_overlap: bool = False
    """Report even if test prompts occur in validation or a training pool (the report says so)."""
    problems: int = 100
    """Test problems."""
    val_problems: int = 50
    """Validation problems (they choose the cascade direction)."""
    problem_seed: int = 0
    """Seed of the test/validation problem sample."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Sampling seeds (several: mean ± std, pass@k)."""
    methods: Annotated[list[str], tyro.conf.arg(metavar="METHOD ...")] = field(
        default_factory=lambda: list(DEFAULT_METHODS)
    )
    """Methods to run (default: all but those a run must opt into, e.g. ``latent-cascade``)."""
    temperature: float | None = None
    """Every policy's temperature, the run's per-adapter temperatures included (None: each run's own)."""
    top_p: float | None = None
    """None: each run's own."""
    max_new_tokens: int | None = None
    """None: each run's own."""
    batch_size: int = SamplingParams.max_batch_size
    """Prompts per forward batch (memory, not results)."""
    device: str = ModelConfig.device
    """``cpu``, ``cuda`` or ``auto`` (CUDA when available), as in ``agon train``."""
    backend: str = ModelConfig.backend
    """What generates: ``hf``, ``vllm`` or ``auto`` (vLLM where it is installed and loads the model),
    the table ``agon train --model.backend`` and ``agon serve --backend`` name
    (:data:`agon_env.runtime.BACKENDS`)."""
    confidence: float = 0.95
    """Interval coverage."""
    out: str | None = None
    """Output folder (None: RUN/eval for one run, else ./eval)."""
    cache_dir: str | None = None
    """Base sample cache (None: ``$AGON_EVAL_CACHE_DIR``, else ~/.cache/agon_env/eval-samples)."""
    cache: bool = True
    """Use the on-disk sample cache of base samples (``--no-cache``: neither read nor write it)."""
    quiet: bool = False
    """Print no progress and no report (the files are still written)."""


def eval_main(argv: Sequence[str]) -> int:
    """``agon eval ARGV``."""
    return run_command(EvalArgs, argv, "agon eval", lambda args: run_eval(args, argv))


def _kwargs(items: list[str]) -> JSONRecord:
    return parse_assignments(items, "--env-kwarg")


def _task_choice(args: EvalArgs, cfg: TrainConfig) -> tuple[str, dict[str, Any]]:
    if args.data:
        kwargs = {"path": args.data, "question_field": args.question_field, "answer_field": args.answer_field}
        return "agon/math-v0", {**kwargs, **_kwargs(args.env_kwarg)}
    env_id = args.env or cfg.env.id
    from agon_env.evaluation.runs import run_task_kwargs

    return env_id, {**run_task_kwargs(cfg, env_id), **_kwargs(args.env_kwarg)}


def _one_base(args: EvalArgs, configs: list[TrainConfig]) -> None:
    """Refuse runs on different base models: every run is compared with one untrained base."""
    models = {str(r): args.model or c.model.name for r, c in zip(args.runs, configs, strict=True)}
    if len(set(models.values())) > 1:
        listed = ", ".join(f"{r} on {m}" for r, m in models.items())
        raise InputError(
            f"the runs have different base models ({listed}); evaluate each base's runs separately"
        )


def _shared(values: list[Any]) -> Any:
    """The value every run has, or ``None`` when they differ (each run's own is in its record)."""
    return values[0] if all(v == values[0] for v in values) else None


def run_eval(args: EvalArgs, argv: Sequence[str] = ()) -> int:
    """Evaluate as ``args`` say; ``argv`` is what the report records as its command."""
    from agon_env.evaluation.checks import (
        check_confidence,
        check_distinct_adapters,
        check_distinct_folders,
        check_sampling,
        check_seeds,
    )

    # What the command line alone can refuse, before anything is imported, read or loaded.
    check_confidence(args.confidence)
    check_seeds(args.seeds)
    check_distinct_folders(args.runs)
    check_sampling(
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        max_batch_size=args.batch_size,
    )

    from agon_env.agents.models import check_source
    from agon_env.evaluation.cache import SampleCache
    from agon_env.evaluation.evaluate import Evaluator
    from agon_env.evaluation.report import across_runs
    from agon_env.evaluation.report_file import write_eval_report
    from agon_env.evaluation.runs import PolicyLoader, settings_for, weights_hashes
    from agon_env.evaluation.splits import (
        HOW_CHECKED,
        check_heldout,
        load_eval_data,
        overlap_count,
        training_pool,
    )
    from agon_env.resolved import settle
    from agon_env.run_folder import EVAL, check_writable
    from agon_env.runtime import RunOnDisk

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"agon eval: {msg}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    disks = [RunOnDisk.read(r) for r in args.runs]  # each folder read once, here
    out = Path(args.out) if args.out else (disks[0].eval_dir if len(disks) == 1 else Path(EVAL))
    check_writable(out, "--out")  # before any model loads or any sample is drawn
    runs = [d.run for d in disks]
    configs = [run.config for run in runs]
    _one_base(args, configs)
    cfg = configs[0] if configs else TrainConfig()  # no run: the untrained base, default run's settings
    check_source(args.model or cfg.model.name)
    check_distinct_adapters({str(d.path): weights_hashes(d) for d in disks})
    env_id, task_kwargs = _task_choice(args, cfg)
    data = load_eval_data(
        env_id, task_kwargs, args.split, args.problems, args.val_problems, args.problem_seed
    )
    check_heldout(
        data,
        [(str(r), training_pool(c.env.id, c.env.kwargs)) for r, c in zip(args.runs, configs, strict=True)],
        args.allow_overlap,
    )
    overrides = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_new_tokens": args.max_new_tokens,
        "max_batch_size": args.batch_size,
    }
    # Each run as it trained: its own sampling, temperatures, prompt family and chat template.
    settings = [settings_for(r, data.test.task, **overrides) for r in runs or [settle(cfg)]]
    overlaps = overlap_count(data.check)
    log(
        f"{env_id} {task_kwargs}: {len(data.test.indices)} test / {len(data.validation.indices)} validation "
        + (
            f"problems; {overlaps} prompts overlap (allowed by --allow-overlap), checked by {HOW_CHECKED}"
            if overlaps
            else f"problems; disjoint from validation and training by {HOW_CHECKED}"
        )
    )
    from agon_env.agents.models import resolve_device
    from agon_env.runtime import pick_backend

    loader = PolicyLoader(
        resolve_device(args.device), pick_backend(args.backend, args.model or cfg.model.name)
    )
    cache = SampleCache((args.cache_dir or default_cache_dir()) if args.cache else None)
    evaluator = Evaluator(
        data, seeds=args.seeds, methods=args.methods, confidence=args.confidence, cache=cache, log=log
    )
    results = []
    try:
        if args.runs:
            for i, (disk, s) in enumerate(zip(disks, settings, strict=True)):
                policies = loader.run_policies(disk, s, index=i, model=args.model)
                results.append({**evaluator.evaluate(policies), "settings": s.describe(policies.adapters)})
        else:
            policies = loader.base_policies(args.model or cfg.model.name, settings[0])
            results.append({**evaluator.evaluate(policies), "settings": settings[0].describe()})
    finally:
        loader.runtime.close()  # vLLM's engine runs in processes of its own
    report = {
        "data": data.describe(),
        "seeds": list(args.seeds),
        "methods": list(args.methods),
        "confidence": args.confidence,
        # Shared settings at the top when the runs agree; each run's own is in runs[i].settings.
        "sampling": _shared([r["settings"]["sampling"] for r in results]),
        "prompts": _shared([r["settings"]["prompts"] for r in results]),
        "runs": results,
        "across_runs": across_runs(results, args.confidence),
        "seconds": time.perf_counter() - start,
        "command": " ".join(["agon eval", *map(str, argv)]),
    }
    jpath, mpath = write_eval_report(report, out)
    if not args.quiet:
        print(mpath.read_text())
    log(f"wrote {jpath} and {mpath} in {report['seconds']:.0f} s")
    return 0


@dataclass
class PlotArgs(CommandArgs):
    """Training curves per adapter, win and conversion rates, trace length over steps (from each
    run's metrics.jsonl), and accuracy vs. trace length per method (from eval reports;
    RUN/eval/eval.json is picked up automatically). Several runs are overlaid."""

    runs: Annotated[list[str], tyro.conf.Positional, tyro.conf.arg(metavar="RUN ...")] = field(
        default_factory=list
    )
    """Run folders with metrics.jsonl."""
    eval: Annotated[list[str], tyro.conf.UseAppendAction, tyro.conf.arg(metavar="REPORT")] = field(
        default_factory=list
    )
    """An eval.json (or its folder), repeatable."""
    out: str = "plots"
    """Output folder for the PNGs."""
    smooth: int | None = None
    """Centred moving-mean window in steps, made odd (None: steps / 10)."""


def plot_main(argv: Sequence[str]) -> int:
    """``agon plot ARGV``."""
    return run_command(PlotArgs, argv, "agon plot", run_plot)


def run_plot(args: PlotArgs) -> None:
    from agon_env.evaluation.plots import plot_all
    from agon_env.run_folder import check_writable

    check_writable(args.out, "--out")  # before any run is read or figure drawn
    for p in plot_all(args.runs, args.out, args.eval, args.smooth):
        print(p)
