"""Cost against TRL: the same single-adapter GRPO workload through TRL's ``GRPOTrainer`` and
through ``agon train --algo grpo``; then ``agon train --algo agon`` ÷ our GRPO.

The workload is held equal on every axis the two trainers share:

* model: SmolLM2-135M-Instruct from the same local folder, float32, on CPU, same torch threads;
* LoRA r16 / alpha 32 on every linear layer, dropout 0 (the very ``peft.LoraConfig`` our
  ``LoraSpec`` builds);
* B problems × N generations per step, ``max_new_tokens``, temperature, top-p, one optimiser
  step per training step (TRL: ``per_device_train_batch_size`` = our micro-batch and
  ``gradient_accumulation_steps`` = B·N / micro-batch, so one generation batch feeds one
  optimiser step, as ours does), lr, clip ε, grad-norm clip, no KL (``beta=0``, so neither
  runs a reference forward), one inner iteration, std-normalised group advantages and the
  per-sequence-mean token aggregation (TRL's ``loss_type="grpo"``);
* prompts: the same ``agon/arith-v0`` training problems in the same order (our sampler's
  order, handed to TRL with shuffling off), rendered to the same few-shot chat messages our
  agents send (``observation_messages``), which TRL passes through the same chat template;
* reward: the env's own solo-mode reward ``2c + λφ`` (the TRL reward function steps an
  ``agon/arith-v0`` env with each completion), so both optimise the same number.

What differs is what each trainer does by design, and is reported, not hidden: our GRPO
drops groups whose rewards have zero variance before the update (the paper's σ > 0 rule;
TRL still runs their forward/backward with zero advantage); our sampler stops a row at
``</answer>`` as well as at EOS (TRL's ``model.generate`` path cannot take a stop string
without a tokenizer, so rows stop at EOS, which SmolLM2 emits right after ``</answer>``
when it follows the few-shot format); and TRL defaults to gradient checkpointing and
bf16 autocast. bf16 is turned off (both trainers in float32, so the comparison is of
trainers, not precisions); gradient checkpointing is measured both ways when
``--trl-grad-ckpt both`` (the default), and the goal ratios use TRL *without* it (the same
computation as ours, and TRL's faster setting).

Each run is its own subprocess: peak RSS is the child's ``ru_maxrss`` from ``os.wait4``
(exact for that process, unlike polling), and no run inherits another's allocator state.
Per-step wall time is measured inside each trainer around one whole step (sampling,
scoring, loss, backward, optimiser and scheduler): ours is ``time/step`` in the run's
``metrics.jsonl``; TRL's comes from a ``TrainerCallback`` (``on_step_begin`` →
``on_step_end``). Checkpointing and logging are outside both. The first ``--warmup``
steps are excluded (lazy initialisation, the verifier's child process start).

    HF_HUB_OFFLINE=1 python benchmarks/vs_trl.py                  # the default workload
    python benchmarks/vs_trl.py --steps 4 --batch-problems 2 --trl-grad-ckpt off
    python benchmarks/vs_trl.py --model tiny --steps 2            # plumbing check, seconds

Goals: our GRPO step ÷ TRL ≤ 0.8; our peak RSS ÷ TRL ≤ 1.0; Agon step ÷ our GRPO ≤ 2.0.
Prints one JSON object as its last line. Needs ``pip install -e .[bench]`` (TRL).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

GOALS = {
    "grpo_step_ratio": 0.5,
    "peak_rss_ratio": 0.8,
    "agon_over_grpo": 2.0,
    "agon_peak_over_grpo_peak": 1.5,
}
"""Upper bounds from issue #15: ours ÷ TRL per step and in memory, Agon ÷ our GRPO per step and in memory."""


WORKLOAD = {
    "env.kwargs": {"difficulty": 2},
    "steps": 6,
    "batch_problems": 4,
    "sampling.max_new_tokens": 48,
    "threads": 2,
}
"""The workload as overrides of ``agon train``'s defaults (``TrainConfig()``); TRL is told the
same ``TrainConfig``, every knob of :data:`SHARED`."""
SHARED = {
    "model": "model.name",
    "difficulty": "env.kwargs.difficulty",
    "steps": "steps",
    "batch_problems": "batch_problems",
    "num_generations": "grpo.num_generations",
    "max_new_tokens": "sampling.max_new_tokens",
    "micro_batch": "grpo.micro_batch",
    "temperature": "sampling.temperature",
    "top_p": "sampling.top_p",
    "lr": "optim.lr",
    "warmup_ratio": "optim.warmup_ratio",
    "lora_r": "model.lora_r",
    "lora_alpha": "model.lora_alpha",
    "eps": "grpo.eps",
    "max_grad_norm": "grpo.max_grad_norm",
    "lam": "env.lam",
    "seed": "seed",
    "threads": "threads",
    "beta": "grpo.beta",
    "inner_iters": "grpo.inner_iters",
    "advantage": "grpo.advantage",
    "aggregation": "grpo.aggregation",
}
"""Every knob both trainers are told, by its name in a record (``workload`` of each run and of
the result: the names it has always had) and its ``TrainConfig`` key; also this script's flags."""
TRL_ADVANTAGE = {"std": "group"}
"""Our ``grpo.advantage`` as TRL's ``scale_rewards`` (the ones TRL has)."""
TRL_AGGREGATION = {"seq-mean": "grpo"}
"""Our ``grpo.aggregation`` as TRL's ``loss_type`` (per-sequence mean, then over sequences)."""


def _get(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = cfg[part] if isinstance(cfg, dict) else getattr(cfg, part)
    return cfg


def workload(cfg: Any) -> dict[str, Any]:
    """The record of ``cfg``: each :data:`SHARED` knob by name."""
    return {name: _get(cfg, key) for name, key in SHARED.items()}


PINNED = {"beta": 0.0, "inner_iters": 1, "advantage": "std", "aggregation": "seq-mean"}
"""What TRL was told of the knobs a record has not always named: a record without them ran these."""


def told(w: dict[str, Any]) -> dict[str, Any]:
    """The ``TrainConfig`` overrides that give the workload record ``w`` (what the TRL child reads)."""
    return {k: v for name, value in w.items() for k, v in _overrides(name, value).items()}


def _overrides(name: str, value: Any) -> dict[str, Any]:
    key = SHARED[name]
    return {"env.kwargs": {"difficulty": value}} if key == "env.kwargs.difficulty" else {key: value}


# -- children ------------------------------------------------------------------------------


def _model_folder(model: str, scratch: Path) -> str:
    """A plain HF folder for ``model`` (what TRL loads): the embedded SmolLM2, or a saved tiny model."""
    from agon_env.agents.models import ensure_smollm2_folder, load_base

    if model == "smollm2-135m":
        return str(ensure_smollm2_folder())
    if model == "tiny":
        folder = scratch / "tiny-model"
        if not folder.is_dir():
            m, tok = load_base("tiny")
            m.save_pretrained(folder)
            tok.save_pretrained(folder)
        return str(folder)
    return model


def _problem_order(w: Any, size: int) -> list[int]:
    """The training problems ``agon train`` will see, step by step (its own sampler, same seed)."""
    from agon_env.algorithms.sampler import ProblemSampler

    sampler = ProblemSampler(size, seed=w.seed)
    return [i for _ in range(w.steps) for i in sampler.take(w.batch_problems)]


def trl_child(cfg: Any, out: Path, grad_ckpt: bool) -> dict[str, Any]:
    """One TRL ``GRPOTrainer`` run of ``cfg`` (a ``TrainConfig``); returns per-step times and
    TRL's own logged metrics."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import agon_env
    from agon_env.agents.adapters import LoraSpec
    from agon_env.agents.prompts import observation_messages

    w = SimpleNamespace(**workload(cfg))
    if w.advantage not in TRL_ADVANTAGE or w.aggregation not in TRL_AGGREGATION:
        raise SystemExit(
            f"TRL has no grpo.advantage {w.advantage!r} / grpo.aggregation {w.aggregation!r} "
            f"here: use {list(TRL_ADVANTAGE)} / {list(TRL_AGGREGATION)}"
        )
    torch.set_num_threads(w.threads)
    torch.manual_seed(w.seed)
    env = agon_env.make("agon/arith-v0", mode="solo", lam=w.lam, difficulty=w.difficulty)
    order = _problem_order(w, len(env.task))

    def prompt_of(index: int) -> list[dict[str, str]]:
        e = env.spawn()
        e.reset(options={"problem_index": index})
        return observation_messages(e.observe(e.agent_selection))

    data = Dataset.from_list([{"prompt": prompt_of(i), "problem_index": i} for i in order])

    def env_reward(completions: list[Any], problem_index: list[int], **_: Any) -> list[float]:
        # Score through the env itself: the same parser, verifier and 2c + λφ as our solo stream.
        rewards = []
        for completion, index in zip(completions, problem_index, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            e = env.spawn()
            e.reset(options={"problem_index": int(index)})
            seat = e.agent_selection
            e.step(text)
            rewards.append(float(e.rewards[seat]))
        return rewards

    rows = w.batch_problems * w.num_generations
    if rows % w.micro_batch:
        raise SystemExit(f"B·N = {rows} must be a multiple of --micro-batch {w.micro_batch}")
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=w.steps,
        per_device_train_batch_size=w.micro_batch,
        gradient_accumulation_steps=rows // w.micro_batch,
        num_generations=w.num_generations,
        max_completion_length=w.max_new_tokens,
        temperature=w.temperature,
        top_p=w.top_p,
        learning_rate=w.lr,
        lr_scheduler_type="linear",
        warmup_steps=round(w.warmup_ratio * w.steps),
        max_grad_norm=w.max_grad_norm,
        beta=w.beta,
        num_iterations=w.inner_iters,
        epsilon=w.eps,
        scale_rewards=TRL_ADVANTAGE[w.advantage],
        loss_type=TRL_AGGREGATION[w.aggregation],
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_checkpointing=grad_ckpt,
        model_init_kwargs={"dtype": torch.float32},
        shuffle_dataset=False,
        seed=w.seed,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        log_completions=False,
    )

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self._t0 = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.times.append(time.perf_counter() - self._t0)

    timer = StepTimer()
    lora = LoraSpec(r=w.lora_r, alpha=w.lora_alpha).lora_config()
    trainer = GRPOTrainer(
        model=_model_folder(w.model, out),
        reward_funcs=env_reward,
        args=config,
        train_dataset=data,
        peft_config=lora,
        callbacks=[timer],
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return {
        "step_times": timer.times,
        "reward": [h.get("reward") for h in logs],
        "completion_len": [h.get("completions/mean_length") for h in logs],
        "trl_version": __import__("trl").__version__,
    }


def child_main(kind: str, spec: str, out: str) -> None:
    import resource

    from agon_env.config import from_dict

    cfg = from_dict(json.loads(spec))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = trl_child(cfg, Path(out), grad_ckpt=kind == "trl-ckpt")
    result["peak_rss_mb_self"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# -- the parent ----------------------------------------------------------------------------


def run_child(cmd: list[str], log: Path) -> tuple[float, float, str]:
    """Run ``cmd``; return (wall seconds, peak RSS MB of that child, its stdout)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        # wait4 reaps this very child and returns its own rusage: ru_maxrss is its peak RSS (KiB).
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}; stderr tail:\n{tail}")
    return wall, usage.ru_maxrss / 1024, stdout


def agon_cmd(w: dict[str, Any], algo: str, run_dir: Path, extra: dict[str, Any] | None = None) -> list[str]:
    """``agon train`` with every knob of the workload ``w`` (a :func:`workload` record) spelled out;
    ``extra`` adds ``TrainConfig`` overrides no record names (a lever under test)."""
    from agon_env.algorithms.commands.train import train_flags

    # Checkpoint once at the end only: TRL is told save_strategy="no".
    run = {"algo": algo, "save_every": w["steps"], "time_budget_min": 0, "out_dir": str(run_dir)}
    args = train_flags({**told(w), "model.device": "cpu", **run, "progress": False, **(extra or {})})
    return [sys.executable, "-m", "agon_env.algorithms.commands.train", *args]


def summarize(times: list[float], warmup: int) -> dict[str, float]:
    kept = times[warmup:] or times
    return {
        "step_s_mean": statistics.fmean(kept),
        "step_s_median": statistics.median(kept),
        "step_s_min": min(kept),
        "steps_timed": len(kept),
    }


def run_ours(
    w: dict[str, Any],
    algo: str,
    scratch: Path,
    warmup: int,
    extra: dict[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    run_dir = scratch / f"agon-{name or algo}"
    shutil.rmtree(run_dir, ignore_errors=True)
    load0 = os.getloadavg()[0]
    wall, rss, _ = run_child(agon_cmd(w, algo, run_dir, extra), scratch / f"agon-{name or algo}.log")
    from agon_env.metric_names import TIME_STEP
    from agon_env.run_folder import read_metrics

    rows = read_metrics(run_dir)
    times = [r[TIME_STEP] for r in rows]
    out = {
        "name": f"agon train --algo {algo}",
        **summarize(times, warmup),
        "step_times": times,
        "peak_rss_mb": rss,
        "wall_s": wall,
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "rollout_s_mean": statistics.fmean(r["time/rollout"] for r in rows[warmup:] or rows),
        "update_s_mean": statistics.fmean(r["time/update"] for r in rows[warmup:] or rows),
        "groups_dropped_mean": statistics.fmean(r.get("groups_dropped", 0.0) for r in rows),
        # Tokens per completion: the step's generated tokens over its B·N·turns completions.
        "completion_len_mean": statistics.fmean(
            r.get("len_tokens/drafter", r["tokens"] / (w["batch_problems"] * w["num_generations"]))
            for r in rows
        ),
        "reward_mean": [r.get("reward/drafter") for r in rows],
    }
    return out


def run_trl(w: dict[str, Any], kind: str, scratch: Path, warmup: int) -> dict[str, Any]:
    out_dir = scratch / kind
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--spec",
        json.dumps(told(w)),
        "--child-out",
        str(out_dir),
    ]
    load0 = os.getloadavg()[0]
    wall, rss, stdout = run_child(cmd, scratch / f"{kind}.log")
    res = json.loads(stdout.strip().splitlines()[-1])
    lens = [x for x in res["completion_len"] if x is not None]
    return {
        "name": "TRL GRPOTrainer" + (" (gradient checkpointing)" if kind == "trl-ckpt" else ""),
        **summarize(res["step_times"], warmup),
        "step_times": res["step_times"],
        "peak_rss_mb": rss,
        "wall_s": wall,
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "completion_len_mean": statistics.fmean(lens) if lens else None,
        "reward_mean": res["reward"],
        "trl_version": res["trl_version"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, key in SHARED.items():  # values are YAML, typed by the TrainConfig key
        ap.add_argument(f"--{name.replace('_', '-')}", type=yaml.safe_load, default=None, help=f"sets {key}")
    ap.add_argument("--warmup", type=int, default=1, help="leading steps left out of the step-time figures")
    ap.add_argument(
        "--trl-grad-ckpt",
        choices=("off", "on", "both"),
        default="both",
        help="TRL gradient checkpointing (TRL's default is on); goals use 'off' when measured",
    )
    ap.add_argument("--no-agon", action="store_true", help="skip the --algo agon run")
    ap.add_argument("--scratch", default=None, help="folder for run outputs and child logs (default: temp)")
    ap.add_argument("--resume", action="store_true", help="reuse runs already recorded in --scratch")
    ap.add_argument(
        "--rerun",
        nargs="*",
        default=[],
        choices=("ours_grpo", "trl", "trl_ckpt", "ours_agon"),
        help="with --resume: measure these again anyway",
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args.child, args.spec, args.child_out)
        return

    from agon_env.config import from_dict

    given = [_overrides(name, getattr(args, name)) for name in SHARED if getattr(args, name) is not None]
    w = workload(from_dict({k: v for o in [WORKLOAD, *given] for k, v in o.items()}))
    if w["steps"] <= args.warmup:
        ap.error(f"--steps ({w['steps']}) must exceed --warmup ({args.warmup}) to leave timed steps")
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="vs_trl-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"workload: {json.dumps(w)}; outputs in {scratch}", flush=True)
    plan: dict[str, Any] = {"ours_grpo": lambda: run_ours(w, "grpo", scratch, args.warmup)}
    if args.trl_grad_ckpt in ("off", "both"):
        plan["trl"] = lambda: run_trl(w, "trl", scratch, args.warmup)
    if args.trl_grad_ckpt in ("on", "both"):
        plan["trl_ckpt"] = lambda: run_trl(w, "trl-ckpt", scratch, args.warmup)
    if not args.no_agon:
        plan["ours_agon"] = lambda: run_ours(w, "agon", scratch, args.warmup)
    runs: dict[str, dict[str, Any]] = {}
    for key, measure in plan.items():
        record = scratch / f"{key}.json"
        # On a shared machine a run can be OOM-killed by someone else's job; --resume keeps the
        # finished runs of the same workload (each record carries its own load average and time).
        if args.resume and key not in args.rerun and record.is_file():
            saved = json.loads(record.read_text())
            if {**PINNED, **saved.get("workload", {})} == w:
                runs[key] = saved
                _show(runs[key], reused=True)
                continue
        runs[key] = {
            **measure(),
            "workload": w,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        }
        record.write_text(json.dumps(runs[key]) + "\n")
        _show(runs[key])

    ref = runs.get("trl") or runs["trl_ckpt"]
    ours = runs["ours_grpo"]
    ratios = {
        "grpo_step_ratio": ours["step_s_mean"] / ref["step_s_mean"],
        "peak_rss_ratio": ours["peak_rss_mb"] / ref["peak_rss_mb"],
    }
    if "trl_ckpt" in runs and "trl" in runs:
        ratios["grpo_step_ratio_vs_trl_ckpt"] = ours["step_s_mean"] / runs["trl_ckpt"]["step_s_mean"]
        ratios["peak_rss_ratio_vs_trl_ckpt"] = ours["peak_rss_mb"] / runs["trl_ckpt"]["peak_rss_mb"]
    if "ours_agon" in runs:
        ratios["agon_over_grpo"] = runs["ours_agon"]["step_s_mean"] / ours["step_s_mean"]
        ratios["agon_peak_over_grpo_peak"] = runs["ours_agon"]["peak_rss_mb"] / ours["peak_rss_mb"]
    met = {k: ratios[k] <= bound for k, bound in GOALS.items() if k in ratios}
    print()
    for k, v in ratios.items():
        goal = f"  (goal ≤ {GOALS[k]}: {'met' if met[k] else 'MISSED'})" if k in GOALS else ""
        print(f"{k:32s} {v:6.3f}{goal}")
    result = {
        "bench": "vs_trl",
        "workload": w,
        "warmup_steps_excluded": args.warmup,
        "ratios": ratios,
        "goals": GOALS,
        "goals_met": met,
        "runs": {
            k: {kk: vv for kk, vv in v.items() if kk not in ("reward_mean", "workload")}
            for k, v in runs.items()
        },
        "trl_version": ref["trl_version"],
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}",
        "loadavg_end": os.getloadavg(),
        "scratch": str(scratch),
    }
    print(json.dumps(result))


def _show(r: dict[str, Any], reused: bool = False) -> None:
    steps = " ".join(f"{t:.1f}" for t in r["step_times"])
    clen = r.get("completion_len_mean")
    print(
        f"{r['name']:45s} step mean {r['step_s_mean']:6.2f} s  median {r['step_s_median']:6.2f} s  "
        f"peak RSS {r['peak_rss_mb']:7.0f} MB  wall {r['wall_s']:6.0f} s  "
        f"completion {'–' if clen is None else f'{clen:.1f}'} tok  load {r['load_before']:.1f}  "
        f"[steps: {steps}]" + (f" (recorded {r.get('finished')})" if reused else ""),
        flush=True,
    )


if __name__ == "__main__":
    main()
