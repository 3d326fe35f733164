"""A study's units: what each one runs, the lock that keeps it single, and the child that runs it.

A unit is one ``agon eval`` (a calibration level, the untrained base) or one arm × seed:
``agon train`` of its resolved config (a killed run resumes from its last checkpoint), then
``agon eval`` of that run alone. Each unit runs in a child process
(``python -m agon_env.study.units SPEC``) that first takes the unit's lock, so the study's own
process never imports torch, and a unit is never run twice at once: not by two ``agon study
run`` commands, not while an orphaned child of a killed one still runs it (the child holds the
lock; the second command waits for it, then finds the unit done).

Folder layout under the study's ``--out``::

    plan.yaml  registration.json  calibration.json  results.json  report.md
    units/NAME.json   the unit's spec (its commands)       runs/NAME/   its run folder
    units/NAME.started  when its child first took it
    locks/NAME/.lock  its flock                             eval/NAME/   its eval.json, unit.json
    logs/NAME.log     its output                            calibration/KEY=VALUE/  eval.json
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from agon_env.config import TrainConfig, to_dict
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import CHECKPOINT, CURVES, EVAL_REPORT, read_metrics
from agon_env.study.folder import UNIT_RECORD, StudyFolder, write_text_atomic, write_unit_record
from agon_env.study.plan import StudyPlan, two_stage, unit_name
from agon_env.study.records import mark_started, unit_stamp

__all__ = ["UNIT_RECORD", "Lock", "Unit", "arm_unit", "base_unit", "calibration_unit", "write_specs"]


@dataclass
class Unit:
    """One unit's commands (``agon`` argv lists) and folders; a JSON file hands it to its child."""

    name: str
    eval: list[str]
    eval_dir: str
    train: list[str] | None = None
    """``agon train --config UNIT.yaml`` (None: an evaluation alone)."""
    run_dir: str | None = None
    steps: int = 0
    threads: int = 0
    """torch threads (``OMP_NUM_THREADS``; 0: torch's default)."""
    config: JSONRecord | None = None
    """The arm unit's resolved ``TrainConfig`` (what ``--config`` reads, as a dict)."""
    processes: int = 1
    """Training processes (more than 1: data-parallel, ``torchrun --standalone``; docs/scaling.md)."""

    def done(self) -> bool:
        return (Path(self.eval_dir) / EVAL_REPORT).is_file()


class Lock:
    """An exclusive ``flock`` on ``folder/.lock`` (which names the pid, for people).

    The kernel takes it atomically and drops it when its holder dies, so a killed study leaves
    no stale lock. The file stays: unlinking a locked file would let a third process lock a
    fresh one of the same name.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".lock"
        self.fd: int | None = None

    def acquire(self, wait: bool = True) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> bool:
        return self.acquire(wait=False)

    def __exit__(self, *exc: object) -> None:
        self.release()


def trained(folder: Path, steps: int) -> bool:
    """Whether ``folder`` holds a finished run: ``curves.png`` is written after the last adapter
    is saved, and the log has every step. A run killed while saving adapters is resumed (from
    its final checkpoint, which saves them again), never evaluated half-saved."""
    if not (folder / CURVES).is_file():
        return False
    return len(read_metrics(folder)) >= steps


def kwarg_flags(kwargs: JSONRecord) -> list[str]:
    """``--env-kwarg KEY=VALUE`` pairs (YAML values: ``true`` for a bool)."""
    words = [f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in kwargs.items()]
    return [x for w in words for x in ("--env-kwarg", w)]


def level(value: JSONValue) -> JSONValue:
    """A calibrated value as a folder name and a flag spell it (``3.0`` -> ``3``)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def base_sampling(plan: StudyPlan) -> list[str]:
    """The untrained base samples as the plan's training base does (each run samples as its own)."""
    s = plan.base_config().sampling
    return ["--temperature", str(s.temperature), "--max-new-tokens", str(s.max_new_tokens)]


def imports(cfg: TrainConfig) -> list[str]:
    """``agon eval``'s ``--imports`` for the modules a plan's ``train.imports`` names (its tasks)."""
    return ["--imports", *cfg.imports] if cfg.imports else []


def base_eval(plan: StudyPlan, kwargs: JSONRecord, folder: Path, *flags: str) -> list[str]:
    """``agon eval`` of the untrained base on the plan's model and env at ``kwargs``, sampling as
    the plan's training base does, uncached, into ``folder``; ``flags`` say which split and methods."""
    cfg = plan.base_config()
    head = ["eval", "--model", cfg.model.name, "--env", cfg.env.id, *kwarg_flags(kwargs), *flags]
    return [*head, *base_sampling(plan), "--no-cache", "--out", str(folder)]


def calibration_unit(plan: StudyPlan, out: Path, value: JSONValue) -> Unit:
    """The untrained base's few-shot pass@1 on validation with the calibrated keyword at ``value``."""
    cal, cfg = plan.calibration, plan.base_config()
    assert cal is not None
    kwargs = {**cfg.env.kwargs, cal.keyword: level(value)}
    name = f"calibrate-{cal.keyword}={level(value)}"
    folder = StudyFolder(out).calibration_dir(f"{cal.keyword}={level(value)}")
    flags = ["--split", "validation", "--methods", "base-few-shot", "--problems", str(cal.problems)]
    argv = [*base_eval(plan, kwargs, folder, *flags, "--val-problems", "0"), "--quiet", *imports(cfg)]
    return Unit(name, argv, str(folder), threads=cfg.threads)


def test_flags(plan: StudyPlan) -> list[str]:
    """What every test-split evaluation shares: the same problems and evaluation seeds."""
    e = plan.evaluation
    return [
        "--split",
        "test",
        "--problems",
        str(e.test_problems),
        "--val-problems",
        str(e.val_problems),
        "--seeds",
        *map(str, e.seeds),
        "--quiet",
    ]


def base_unit(plan: StudyPlan, out: Path, task: JSONRecord) -> Unit:
    cfg = plan.base_config()
    folder = StudyFolder(out).eval_dir("base")
    flags = ["--methods", *plan.evaluation.base_methods, *test_flags(plan)]
    argv = [*base_eval(plan, {**cfg.env.kwargs, **task}, folder, *flags), *imports(cfg)]
    return Unit("base", argv, str(folder), threads=cfg.threads)


def arm_unit(plan: StudyPlan, out: Path, arm: str, seed: int, task: JSONRecord) -> Unit:
    """Train ``arm`` with ``seed`` from its resolved config file, then evaluate that run alone."""
    name = unit_name(arm, seed)
    study = StudyFolder(out)
    run_dir, eval_dir = study.run(name).path, study.eval_dir(name)
    cfg = plan.unit_config(arm, seed, task, out_dir=str(run_dir))
    config_file = study.unit_config(name)
    methods = list(dict.fromkeys([*plan.evaluation.methods, two_stage(cfg.algo)]))
    if two_stage(cfg.algo) == "self-cascade":
        methods = [m for m in methods if m != "cascade"]  # one adapter: nothing to cascade with
    evaluate = ["eval", str(run_dir), "--methods", *methods, *test_flags(plan), "--out", str(eval_dir)]
    return Unit(
        name,
        evaluate,
        str(eval_dir),
        ["train", "--config", str(config_file)],
        str(run_dir),
        cfg.steps,
        cfg.threads,
        to_dict(cfg),
    )


def write_specs(out: Path, units: list[Unit]) -> dict[str, Path]:
    """Each unit's spec, and an arm unit's config as YAML, under ``out/units``: name -> spec."""
    import yaml

    study = StudyFolder(out)
    study.units.mkdir(parents=True, exist_ok=True)
    specs = {}
    for u in units:
        if u.config is not None:
            write_text_atomic(study.unit_config(u.name), yaml.safe_dump(u.config, sort_keys=False))
        specs[u.name] = study.spec(u.name)
        write_text_atomic(specs[u.name], json.dumps(asdict(u), indent=1) + "\n")
    return specs


def child_env(unit: Unit, device: str | None = None) -> dict[str, str]:
    """The unit child's environment: offline, one log, its threads and its device."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "MPLBACKEND": "Agg"}
    if unit.threads:  # agon eval has no --threads: torch reads this at start-up
        env["OMP_NUM_THREADS"] = str(unit.threads)
    if device and device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
    return env


def read_unit(spec: Path) -> Unit:
    """A unit's spec, ``units/<name>.json`` as :func:`write_specs` wrote it."""
    return Unit(**json.loads(spec.read_text()))


def device_flags(device: str | None) -> list[str]:
    """The flags that put a unit's ``agon train`` and ``agon eval`` on ``device`` (one spelling)."""
    if not device:
        return []
    return ["--device", "cuda" if device.startswith("cuda") else device]


def command(spec: Path) -> list[str]:
    """The child process that runs the unit in ``spec``."""
    return [sys.executable, "-m", "agon_env.study.units", str(spec)]


def train_command(argv: list[str], processes: int) -> list[str] | None:
    """``agon train ARGV`` as a data-parallel launch over ``processes`` (None: one process, this one)."""
    if processes <= 1:
        return None
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(processes),
        "-m",
        "agon_env.cli",
        "train",
        *argv,
    ]


def run_child(spec_path: Path, device: str | None = None) -> int:
    """What the child does: lock the unit, skip it when done, train (resuming), evaluate, stamp."""
    from agon_env.algorithms.commands.train import main as train
    from agon_env.evaluation.commands.eval import eval_main

    agon = {"train": train, "eval": eval_main}
    unit = read_unit(spec_path)
    study = StudyFolder(spec_path.parent.parent)
    lock = Lock(study.lock(unit.name))
    if not lock.acquire(wait=False):
        print(f"{unit.name}: another process runs it; waiting for it", flush=True)
        lock.acquire(wait=True)
    try:
        if unit.done():
            return 0
        started_at = mark_started(study, unit.name)
        on_device = device_flags(device)  # one spelling for train and eval
        if (
            unit.train is not None
            and unit.run_dir is not None
            and not trained(Path(unit.run_dir), unit.steps)
        ):
            folder = Path(unit.run_dir)
            # A run killed after a checkpoint continues; one killed before its first starts over.
            resume = (folder / CHECKPOINT).is_file()
            if not resume and folder.exists():
                shutil.rmtree(folder)
            print(f"{unit.name}: {'resuming from its last checkpoint' if resume else 'training'}", flush=True)
            # A resumed run is its folder's own config.yaml (``agon train --resume --out-dir``).
            argv = ["--out-dir", str(folder), "--resume"] if resume else unit.train[1:]
            launch = train_command([*argv, *on_device], unit.processes)
            rc = (
                agon["train"]([*argv, *on_device])
                if launch is None
                else subprocess.run(launch, check=False).returncode
            )
            if rc:
                return rc
        rc = agon["eval"]([*unit.eval[1:], *on_device])
        if rc == 0:
            run_dir = None if unit.run_dir is None else Path(unit.run_dir)
            write_unit_record(Path(unit.eval_dir), unit_stamp(Path(unit.eval_dir), started_at, run_dir))
        return rc
    finally:
        lock.release()


if __name__ == "__main__":
    device = os.environ.get("AGON_STUDY_DEVICE") or None
    sys.exit(run_child(Path(sys.argv[1]), device))
