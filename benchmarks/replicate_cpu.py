"""The CPU-scale replication of the paper's comparison: ``grpo`` vs ``coop`` vs ``agon``, several seeds.

SmolLM2-135M on ``agon/arith-v0`` at a level calibrated on *validation* to the hard regime,
every arm trained for the same steps, batch and seeds, then evaluated by ``agon eval`` on
held-out test problems disjoint by content from the training pool. The work is a list of
*units*, each kept on disk when it finishes, so the replication runs in pieces across
sittings and resumes with the same command:

1. **calibrate** — base few-shot pass@1 per candidate level on the validation split; the
   first inside :data:`TARGET_BAND` is used, else the one nearest its middle.
2. **base** — the untrained base on the test split (few-shot, zero-shot, MoA), once.
3. **ARM-seedS** — ``agon train --algo ARM --seed S`` (a killed run resumes from its last
   checkpoint), then ``agon eval`` of that run alone: standalone, the cascade (direction
   chosen on validation) and, for ``grpo``, the self-cascade.
4. **report** — ``replication_report.py`` turns the finished units into
   ``docs/results/replication_cpu.json``, ``replication_tables.py`` that into the tables and
   the figure (``--report-only`` reports on whatever is finished, marking what is missing).

    nohup python benchmarks/replicate_cpu.py --out runs/replicate-cpu > replicate.log 2>&1 &
    python benchmarks/replicate_cpu.py --out runs/replicate-cpu --report-only
    python benchmarks/replicate_cpu.py --quick --model tiny --difficulty 1 --out /tmp/q   # plumbing
    python benchmarks/replicate_cpu.py --plan study-2 --out runs/study-2 --workers 2 \
      --results docs/results/study_2.json --docs docs/benchmarks.md --block study-2       # issue #26

``--workers 2`` runs two units at a time (one torch thread each: on 2 cores two single-
threaded processes do more work than one two-threaded one). A unit another process is
running is locked (an ``flock`` its child processes inherit), so a second command never runs
the same unit, not even while an orphaned trainer of a killed replicator is still going.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml
from replication_plans import (  # a sibling file: this folder is on sys.path
    ARITH,
    ARMS,
    PLANS,
    RECORDED,
    TARGET_BAND,
    TRAINING_KEYS,
    UNIT,
    Plan,
    lv,
    two_stage,
)

from agon_env.run_folder import CHECKPOINT, CURVES, EVAL_REPORT, read_metrics  # torch-free


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def agon_main(argv: list[str]) -> int:
    """``agon`` train/eval/plot in this child process (the parent never imports torch)."""
    from agon_env.cli import main

    return main(argv)


class Runner:
    """Runs ``agon ...`` in child processes, one log file each, and times them."""

    def __init__(self, out: Path, threads: int) -> None:
        self.out, self.threads = out, threads
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.timings: dict[str, float] = {}

    def agon(self, name: str, argv: list[str], hold: Lock | None = None) -> None:
        """``agon ARGV``; the child inherits ``hold``'s lock, so the unit stays locked while it lives."""
        cmd = [sys.executable, __file__, "--agon", *argv]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg"}
        if self.threads:  # agon eval has no --threads: torch reads this at start-up
            env["OMP_NUM_THREADS"] = str(self.threads)
        log = self.logs / f"{name}.log"
        say(f"{name}: agon {' '.join(argv)}")
        t0 = time.perf_counter()
        with log.open("a") as f:
            fds = () if hold is None or hold.fd is None else (hold.fd,)
            rc = subprocess.run(
                cmd, stdout=f, stderr=subprocess.STDOUT, env=env, check=False, pass_fds=fds
            ).returncode
        self.timings[name] = time.perf_counter() - t0
        if rc != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-20:])
            raise RuntimeError(f"{name} failed (exit {rc}); see {log}:\n{tail}")
        say(f"{name}: done in {self.timings[name]:.0f} s (load {os.getloadavg()[0]:.1f})")


class Lock:
    """An exclusive ``flock`` on ``folder/.lock`` (which names the pid, for people).

    The kernel takes it atomically and drops it when the last holder dies, so a killed
    replicator leaves no stale lock; :meth:`Runner.agon` hands it to the unit's children, so an
    orphaned ``agon train`` of a killed replicator still holds it and a second replicator
    cannot resume the same run folder under it. The file stays: unlinking a locked file would
    let a third process lock a fresh one of the same name.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".lock"
        self.fd: int | None = None

    def __enter__(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False  # another replicator (or its trainer) is running this unit
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return True

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def sampling_flags(p: Plan) -> list[str]:
    """``agon eval`` samples as the units trained (the base too: the same budget and temperature)."""
    cfg = p.config()
    return [
        "--temperature",
        str(cfg.sampling.temperature),
        "--max-new-tokens",
        str(cfg.sampling.max_new_tokens),
    ]


def eval_flags(p: Plan) -> list[str]:
    """What every test-split evaluation shares: the same problems, seeds and sampling."""
    return [
        "--split", "test",
        "--problems", str(p.test_problems),
        "--val-problems", str(p.val_problems),
        "--seeds", *[str(s) for s in p.eval_seeds],
        *sampling_flags(p),
        "--quiet",
    ]  # fmt: skip


def kwarg_flags(kwargs: dict[str, Any], flag: str | None = "--env-kwarg") -> list[str]:
    """``KEY=VALUE`` words (YAML values: ``true`` for a bool), each after ``flag`` when given."""
    words = [f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in kwargs.items()]
    return [x for w in words for x in ([flag, w] if flag else [w])]


def calibrate(p: Plan, r: Runner) -> tuple[float | None, dict[str, float]]:
    """Base few-shot pass@1 per level on the validation split (never test); the level to train at
    (None off ``agon/arith-v0``: the task as its kwargs size it, measured once)."""
    from agon_env.upgrade import method_id  # light: no torch

    if p.config().env.id != ARITH:  # a level is agon/arith-v0's keyword: the task as its kwargs say
        levels: list[float | None] = [None]
    else:
        levels = [p.difficulty] if p.difficulty is not None else list(p.candidates)
    measured: dict[str, float] = {}
    for d in [None if x is None else lv(x) for x in levels]:
        tag = "default" if d is None else str(d)
        out = r.out / "calibration" / f"d{tag}"
        if not (out / EVAL_REPORT).is_file():
            r.agon(f"calibrate-d{tag}", [
                "eval", "--model", p.config().model.name, "--env", p.config().env.id, *kwarg_flags(p.task(d)),
                "--split", "validation", "--methods", "base-few-shot",
                "--problems", str(p.calibration_problems), "--val-problems", "0", *sampling_flags(p),
                "--no-cache", "--out", str(out), "--quiet",
            ])  # fmt: skip
        report = json.loads((out / EVAL_REPORT).read_text())
        methods = {method_id(k): v for k, v in report["runs"][0]["methods"].items()}  # old folders too
        measured[tag] = methods["base-few-shot"]["pass@1"]["rate"]
        say(f"base few-shot at difficulty {tag}: {100 * measured[tag]:.1f}%")
        if d is not None and p.difficulty is None and TARGET_BAND[0] <= measured[tag] <= TARGET_BAND[1]:
            return d, measured
    if p.config().env.id != ARITH:
        return None, measured
    if p.difficulty is not None:
        return lv(p.difficulty), measured
    middle = sum(TARGET_BAND) / 2
    return lv(float(min(measured, key=lambda d: abs(measured[d] - middle)))), measured


def base_unit(p: Plan, r: Runner, difficulty: float | None, done: set[str]) -> None:
    out = r.out / "eval" / "base"
    if (out / EVAL_REPORT).is_file() or "base" in done:
        return
    lock = Lock(r.out / "locks" / "base")
    with lock as mine:
        if mine:
            r.agon("eval-base", [
                "eval", "--model", p.config().model.name, "--env", p.config().env.id,
                *kwarg_flags(p.task(difficulty)), "--methods", "base-few-shot", "base-zero-shot",
                "moa", *eval_flags(p), "--no-cache", "--out", str(out),
            ], hold=lock)  # fmt: skip


def run_unit(p: Plan, r: Runner, difficulty: float | None, arm: str, seed: int, done: set[str]) -> None:
    """Train ``arm`` with ``seed`` (resuming a killed run), then evaluate that run alone."""
    name = f"{arm}-seed{seed}"
    folder, evald = r.out / "runs" / name, r.out / "eval" / name
    if (evald / EVAL_REPORT).is_file() or name in done:
        return
    lock = Lock(r.out / "locks" / name)
    with lock as mine:
        if not mine:
            say(f"{name}: another replicator holds it, skipped")
            return
        if not trained(folder, p.config().steps):
            # A run killed after a checkpoint continues; one killed before its first starts over.
            resume = ["--resume"] if (folder / CHECKPOINT).is_file() else []
            if not resume and folder.exists():
                shutil.rmtree(folder)
            algo, extra = ARMS[arm]
            unit = {
                "algo": algo,
                "seed": seed,
                "env.kwargs": p.task(difficulty),
                **extra,
                "out_dir": str(folder),
            }
            from agon_env.algorithms.cli_train import train_flags  # light: no torch

            argv = ["train", *train_flags({**p.train, **UNIT, **unit}), *resume]
            r.agon(f"train-{name}", argv, hold=lock)
        methods = list(dict.fromkeys(["standalone", "cascade", two_stage(arm)]))
        argv = ["eval", str(folder), "--methods", *methods, *eval_flags(p), "--out", str(evald)]
        r.agon(f"eval-{name}", argv, hold=lock)


def trained(folder: Path, steps: int) -> bool:
    """Whether ``folder`` holds a finished run: ``curves.png`` is written after the last adapter
    is saved, and the log has every step. A run killed while saving adapters is resumed (from
    its final checkpoint, which saves them again), never evaluated half-saved."""
    if not (folder / CURVES).is_file():
        return False
    return len(read_metrics(folder)) >= steps


def units(p: Plan) -> list[tuple[str, int]]:
    """Seed-major, so each finished seed is a complete comparison of the arms."""
    return [(arm, seed) for seed in p.seeds for arm in p.arms]


def build_plan(args: argparse.Namespace) -> Plan:
    """``--plan``/``--quick`` or the defaults, then the flags: a flag of :data:`RECORDED` and
    ``--train`` override the units' ``TrainConfig``; the others set the plan's own fields."""
    from agon_env.config import parse_assignments

    name = args.plan or ("quick" if args.quick else None)
    plan = Plan(**copy.deepcopy(PLANS[name] if name else {}))
    for f in asdict(plan):
        v = getattr(args, f, None)
        if v is not None and f != "train":
            setattr(plan, f, v)
    given = {key: getattr(args, k) for k, key in RECORDED.items() if getattr(args, k) is not None}
    plan.train.update({**given, **parse_assignments(args.train, "--train")})
    plan.config()  # a mistyped key or value fails here, before anything runs
    unknown = set(plan.arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"--arms: unknown {sorted(unknown)}; choose from {list(ARMS)}")
    return plan


def other_settings(old: dict, new: dict) -> list[str]:
    """The fields in which two plans trained or evaluated differently (the level is whatever
    calibration chose, checked once it has)."""
    # A plan recorded before the prompts were fingerprinted ran the prompts of 35d8054 ("").
    old = {"prompts": "", **old}
    diff = [k for k in TRAINING_KEYS if k != "difficulty" and k in old and old[k] != new.get(k, "")]
    # The train overrides besides the named settings (a record before them has none to compare).
    if "train" in old and _unnamed(old["train"]) != _unnamed(new.get("train", {})):
        diff.append("train")
    return diff


def _unnamed(train: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in train.items() if k not in RECORDED.values()}


FINGERPRINTED = ("arithmetic", "code-function", "code-stdio", "math")
"""The prompt families the fingerprint hashes: the built-in ones it has always hashed. The checkable
tasks' families are not among them (no unit reads them: units train on ``agon/arith-v0``, and adding
them must not refuse a replication recorded before them), nor is any family registered at run time."""


def prompts_fingerprint() -> str:
    """A hash of everything a unit's model reads besides the problem: the :data:`FINGERPRINTED`
    families' system messages and worked examples and the exchange wording (torch-free imports)."""
    import hashlib

    from agon_env.agents.prompts import PROMPT_FAMILIES
    from agon_env.vocabulary import challenger_text

    read = sorted((k, PROMPT_FAMILIES[k]) for k in FINGERPRINTED)
    text = repr(read) + challenger_text("Q", "D") + challenger_text("Q", "D", own=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_resumable(plan: Plan, out: Path) -> None:
    """Refuse to mix units trained or evaluated under different settings in one folder; record
    the plan, its arms and seeds grown by any the folder's plan already had (a run of a subset,
    e.g. ``--arms grpo --seeds 2`` to fit a sitting, must not shrink what the report covers)."""
    path = out / "plan.json"
    record = plan.record()
    if path.is_file():
        old = json.loads(path.read_text())
        diff = other_settings(old, record)
        if diff:
            raise SystemExit(
                f"{out} holds a replication with other {', '.join(diff)} ({ {k: old[k] for k in diff} }); "
                "use another --out or the same settings"
            )
        for key in ("arms", "seeds"):
            record[key] = list(dict.fromkeys([*old.get(key, []), *record[key]]))
    path.write_text(json.dumps(record, indent=1) + "\n")


def parser() -> argparse.ArgumentParser:
    """This script's flags (:func:`build_plan` reads them)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/replicate-cpu", help="output folder (re-running continues in it)")
    ap.add_argument("--quick", action="store_true", help="smallest sizes (the plumbing test): --plan quick")
    ap.add_argument("--plan", choices=sorted(PLANS), default=None, help="a named plan; flags override it")
    ap.add_argument("--workers", type=int, default=1, help="units run at once (2 on a 2-core machine)")
    ap.add_argument("--report-only", action="store_true", help="report on the finished units; train nothing")
    ap.add_argument("--no-report", action="store_true", help="run the units only")
    ap.add_argument("--results", default=None, help="also write the JSON here (docs/results/…)")
    ap.add_argument("--docs", default=None, help="regenerate the marked tables in this Markdown file")
    ap.add_argument("--force", action="store_true", help="replace a --results file of other settings")
    ap.add_argument(
        "--block", default="replication", help="name of the marked block in --docs (and of its figure)"
    )
    ap.add_argument("--difficulty", type=float, default=None, help="skip the search; still measured")
    ap.add_argument("--candidates", type=float, nargs="+", default=None, help="levels to try, in order")
    ap.add_argument("--calibration-problems", type=int, default=None)
    ap.add_argument("--arms", nargs="+", default=None, help=f"subset of {list(ARMS)}")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="training seeds (each arm, each seed)")
    for name in ("test-problems", "val-problems"):
        ap.add_argument(f"--{name}", type=int, default=None)
    for name, key in RECORDED.items():  # values are YAML, typed by the TrainConfig key
        ap.add_argument(f"--{name.replace('_', '-')}", type=yaml.safe_load, default=None, help=f"sets {key}")
    ap.add_argument("--train", nargs="+", default=[], metavar="KEY=VALUE",
                    help="any other TrainConfig override of every unit, e.g. grpo.beta=0.04")  # fmt: skip
    ap.add_argument("--eval-seeds", type=int, nargs="+", default=None)
    return ap


def main() -> None:
    if sys.argv[1:2] == ["--agon"]:
        sys.argv = ["agon", *sys.argv[2:]]  # what eval.json records as its command
        sys.exit(agon_main(sys.argv[1:]))
    args = parser().parse_args()
    plan = build_plan(args)
    if not args.report_only:
        plan.prompts = prompts_fingerprint()
    out = Path(args.out)
    if args.report_only and (out / "plan.json").is_file():  # report on what ran, not on the flags
        plan = Plan.from_record(json.loads((out / "plan.json").read_text()))
    out.mkdir(parents=True, exist_ok=True)
    r = Runner(out, plan.config().threads)
    start = time.perf_counter()
    import replication_report  # sibling files, not a package
    import replication_tables

    # The results file is the durable record: units it holds (same settings) are not redone,
    # even when this machine lost the run folders.
    results = Path(args.results) if args.results else None
    previous = replication_report.recorded(results)
    diff = [] if previous is None else other_settings(previous["plan"], plan.record())
    if diff:
        if not args.force:
            raise SystemExit(f"{results} holds a replication with other {', '.join(diff)}; use another "
                             "--results, or --force to replace it")  # fmt: skip
        previous = None
    done = replication_report.recorded_units(previous)
    if not args.report_only:
        check_resumable(plan, out)
        say(f"plan: {json.dumps(plan.record())}")
        difficulty, measured = calibrate(plan, r)
        if previous is not None and previous["task"]["difficulty"] != difficulty:
            if not args.force:
                raise SystemExit(f"{results} holds level {previous['task']['difficulty']}, calibration "
                                 f"chose {difficulty}: use another --results, or --force")  # fmt: skip
            previous, done = None, set()
        calibration = {"difficulty": difficulty, "measured": measured}
        (out / "calibration.json").write_text(json.dumps(calibration) + "\n")
        say(f"training at difficulty {difficulty}")
        jobs = [lambda: base_unit(plan, r, difficulty, done)]
        jobs += [lambda a=a, s=s: run_unit(plan, r, difficulty, a, s, done) for a, s in units(plan)]
        with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
            failures = [f.exception() for f in [pool.submit(j) for j in jobs] if f.exception() is not None]
        for exc in failures:
            say(str(exc))
        say(f"units finished in {(time.perf_counter() - start) / 60:.1f} min; {len(failures)} failed")
    if args.no_report:
        return
    if (out / "plan.json").is_file():
        plan = Plan.from_record(json.loads((out / "plan.json").read_text()))
    command = " ".join(["python", "benchmarks/replicate_cpu.py", *sys.argv[1:]])
    result = replication_report.build(plan, out, r.timings, units(plan), previous, command)
    lost = replication_report.recorded_units(previous) - replication_report.recorded_units(result)
    if lost and not args.force:
        raise SystemExit(f"{results} holds {', '.join(sorted(lost))}, which this report would drop "
                         "(other --seeds or --arms?); rerun with them, or --force")  # fmt: skip
    replication_tables.write(result, out, results, Path(args.docs) if args.docs else None, args.block)


if __name__ == "__main__":
    main()
