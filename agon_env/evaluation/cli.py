"""``agon eval`` and ``agon plot``.

    agon eval runs/agon-seed0                  # every method on the run's task
    agon eval                                          # the untrained base (few-/zero-shot, MoA)
    agon eval runs/a runs/b --seeds 0 1 2              # two runs, three sampling seeds each
    agon eval --data my.jsonl --question-field q --answer-field a   # any local dataset
    agon plot runs/agon-seed0 runs/grpo-seed0 --out plots

Heavy imports (torch, transformers, matplotlib) happen only when a command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from agon_env.algorithms.config import TrainConfig, parse_assignments
from agon_env.evaluation.methods import DEFAULT_METHODS, METHODS
from agon_env.registry import import_modules


def default_cache_dir() -> Path:
    """``$AGON_EVAL_CACHE_DIR`` or ``~/.cache/agon_env/eval-samples``."""
    env = os.environ.get("AGON_EVAL_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "agon_env" / "eval-samples"


def _user_error(prog: str, exc: BaseException, args: argparse.Namespace) -> int:
    from agon_env.cli import user_error

    return user_error(prog, exc, args.debug)


def _imports_argument(p: argparse.ArgumentParser) -> None:
    from agon_env.cli import add_imports_argument

    add_imports_argument(p)


def add_eval_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval",
        help="evaluate run folders or the untrained base: pass@1 with intervals, baselines, blind spots",
        description=(
            "Evaluate trained adapters (run folders) or the untrained base on a task's test split: "
            "standalone, cascade (direction chosen on validation), MoA, self-cascade and the base with "
            "and without the worked examples (base-few-shot, base-zero-shot). "
            "Writes eval.json and eval.md (a Table-1-style report)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("runs", nargs="*", help="run folders from `agon train`; none = the untrained base")
    p.add_argument("--model", default=None, help="base model (default: the run's, else smollm2-135m)")
    p.add_argument("--env", default=None, help="registered env id (default: the run's, else agon/arith-v0)")
    p.add_argument(
        "--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="task kwarg, repeatable"
    )
    p.add_argument(
        "--data", default=None, help="a local JSONL/JSON/parquet file: evaluates agon/math-v0 on it"
    )
    p.add_argument("--question-field", default="question", help="with --data: the question column")
    p.add_argument("--answer-field", default="answer", help="with --data: the answer column")
    p.add_argument("--split", default="test", help="task split to report on, when the task has splits")
    p.add_argument(
        "--allow-overlap",
        action="store_true",
        help="report even if test prompts occur in validation or a training pool (the report says so)",
    )
    p.add_argument("--problems", type=int, default=100, help="test problems")
    p.add_argument("--val-problems", type=int, default=50, help="validation problems (cascade direction)")
    p.add_argument("--problem-seed", type=int, default=0, help="seed of the test/validation problem sample")
    p.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="sampling seeds (several: mean ± std, pass@k)"
    )
    p.add_argument(
        "--methods",
        nargs="+",
        default=list(DEFAULT_METHODS),
        metavar="METHOD",
        help=f"methods to run: {', '.join(METHODS)}",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="every policy's, the run's per-adapter temperatures included (default: each run's own)",
    )
    p.add_argument("--top-p", type=float, default=None, help="default: each run's own")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: each run's own")
    p.add_argument("--batch-size", type=int, default=32, help="prompts per forward batch (memory bound)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--confidence", type=float, default=0.95, help="interval coverage")
    p.add_argument("--out", default=None, help="output folder (default: RUN/eval for one run, else ./eval)")
    p.add_argument("--cache-dir", default=None, help=f"base sample cache (default {default_cache_dir()})")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk sample cache")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    _imports_argument(p)
    p.set_defaults(func=run_eval)
    return p


def _kwargs(items: list[str]) -> dict[str, Any]:
    return parse_assignments(items, "--env-kwarg")


def _task_choice(args: argparse.Namespace, cfg: TrainConfig) -> tuple[str, dict[str, Any]]:
    if args.data:
        kwargs = {"path": args.data, "question_field": args.question_field, "answer_field": args.answer_field}
        return "agon/math-v0", {**kwargs, **_kwargs(args.env_kwarg)}
    env_id = args.env or cfg.env.id
    # The run's task kwargs (e.g. difficulty) only apply when evaluating on the run's own env.
    inherited = dict(cfg.env.kwargs) if env_id == cfg.env.id else {}
    return env_id, {**inherited, **_kwargs(args.env_kwarg)}


def _one_base(args: argparse.Namespace, configs: list[TrainConfig]) -> None:
    """Refuse runs on different base models: every run is compared with one untrained base."""
    models = {str(r): args.model or c.model.name for r, c in zip(args.runs, configs, strict=True)}
    if len(set(models.values())) > 1:
        listed = ", ".join(f"{r} on {m}" for r, m in models.items())
        raise ValueError(
            f"the runs have different base models ({listed}); evaluate each base's runs separately"
        )


def _shared(values: list[Any]) -> Any:
    """The value every run has, or ``None`` when they differ (each run's own is in its record)."""
    return values[0] if all(v == values[0] for v in values) else None


def run_eval(args: argparse.Namespace) -> int:
    from agon_env.evaluation.cache import SampleCache
    from agon_env.evaluation.evaluate import Evaluator
    from agon_env.evaluation.report import across_runs, write_report
    from agon_env.evaluation.runs import PolicyLoader, RunFolderError, read_run_config, settings_for
    from agon_env.evaluation.splits import (
        HOW_CHECKED,
        check_heldout,
        load_eval_data,
        overlap_count,
        training_pool,
    )

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"agon eval: {msg}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    try:
        import_modules(args.imports)
        configs = [read_run_config(r) for r in args.runs]
        _one_base(args, configs)
        cfg = configs[0] if configs else TrainConfig()  # no run: the untrained base, default run's settings
        env_id, task_kwargs = _task_choice(args, cfg)
        data = load_eval_data(
            env_id, task_kwargs, args.split, args.problems, args.val_problems, args.problem_seed
        )
        check_heldout(
            data,
            [
                (str(r), training_pool(c.env.id, c.env.kwargs))
                for r, c in zip(args.runs, configs, strict=True)
            ],
            args.allow_overlap,
        )
        overrides = {
            "temperature": args.temperature,
            "top_p": args.top_p,
            "max_new_tokens": args.max_new_tokens,
            "max_batch_size": args.batch_size,
        }
        # Each run as it trained: its own sampling, temperatures, prompt family and chat template.
        settings = [settings_for(c, data.test.task, **overrides) for c in configs or [cfg]]
    except (RunFolderError, ValueError, KeyError, FileNotFoundError, TypeError, ImportError) as exc:
        return _user_error("agon eval", exc, args)
    overlaps = overlap_count(data.check)
    log(
        f"{env_id} {task_kwargs}: {len(data.test.indices)} test / {len(data.validation.indices)} validation "
        + (
            f"problems; {overlaps} prompts overlap (allowed by --allow-overlap), checked by {HOW_CHECKED}"
            if overlaps
            else f"problems; disjoint from validation and training by {HOW_CHECKED}"
        )
    )
    loader = PolicyLoader(args.device)
    cache = SampleCache(None if args.no_cache else (args.cache_dir or default_cache_dir()))
    evaluator = Evaluator(
        data, seeds=args.seeds, methods=args.methods, confidence=args.confidence, cache=cache, log=log
    )
    results = []
    try:
        if args.runs:
            for i, (run, s) in enumerate(zip(args.runs, settings, strict=True)):
                policies = loader.run_policies(run, s, index=i, model=args.model)
                results.append({**evaluator.evaluate(policies), "settings": s.describe(policies.adapters)})
        else:
            policies = loader.base_policies(args.model or cfg.model.name, settings[0])
            results.append({**evaluator.evaluate(policies), "settings": settings[0].describe()})
    except (RunFolderError, ValueError, KeyError, FileNotFoundError, TypeError) as exc:
        return _user_error("agon eval", exc, args)
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
        "command": "agon eval " + " ".join(sys.argv[2:] if sys.argv[1:2] == ["eval"] else sys.argv[1:]),
    }
    out = (
        Path(args.out) if args.out else (Path(args.runs[0]) / "eval" if len(args.runs) == 1 else Path("eval"))
    )
    jpath, mpath = write_report(report, out)
    if not args.quiet:
        print(mpath.read_text())
    log(f"wrote {jpath} and {mpath} in {report['seconds']:.0f} s")
    return 0


def add_plot_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "plot",
        help="figures from run folders and eval reports (PNG)",
        description=(
            "Training curves per adapter, win and conversion rates, trace length over steps (from each "
            "run's metrics.jsonl), and accuracy vs. trace length per method (from eval reports; "
            "RUN/eval/eval.json is picked up automatically). Several runs are overlaid."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("runs", nargs="*", help="run folders with metrics.jsonl")
    p.add_argument(
        "--eval", action="append", default=[], metavar="REPORT", help="an eval.json (or its folder)"
    )
    p.add_argument("--out", default="plots", help="output folder for the PNGs")
    p.add_argument("--smooth", type=int, default=None, help="moving-average window (default: steps / 10)")
    p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    _imports_argument(p)
    p.set_defaults(func=run_plot)
    return p


def run_plot(args: argparse.Namespace) -> int:
    from agon_env.evaluation.plots import NoMetricsError, plot_all

    try:
        import_modules(args.imports)
        paths = plot_all(args.runs, args.out, args.eval, args.smooth)
    except (NoMetricsError, FileNotFoundError, ValueError, ImportError) as exc:
        return _user_error("agon plot", exc, args)
    for p in paths:
        print(p)
    return 0
