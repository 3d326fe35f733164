"""Checkpoints: everything a killed run needs to continue as if it had never stopped.

One file, ``checkpoint.pt``, holds the adapters' LoRA weights, each adapter's optimiser
and scheduler, the Python / NumPy / torch RNG states, the data sampler's position, the
the step, and the identity of the run (base model, adapter
set, LoRA shape). It is written to a temporary file and moved into place with
``os.replace``, so a SIGKILL at any moment leaves either the previous checkpoint or the
new one, never a torn file.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agon_env.json_value import JSONRecord
from agon_env.run_folder import CHECKPOINT, WRITE_FAULTS, RunFolderError, check_writable
from agon_env.runtime import read_checkpoint

__all__ = ["read_checkpoint"]  # its reader is the runtime's, one for training and loading


@dataclass(frozen=True)
class RunIdentity:
    """What a checkpoint must match to be resumed: same base, same adapters, same LoRA shape."""

    model: str
    adapters: tuple[str, ...]
    lora_r: int
    lora_alpha: int

    def mismatch(self, other: RunIdentity) -> str | None:
        for name in ("model", "adapters", "lora_r", "lora_alpha"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                return f"{name} is {theirs!r} in the checkpoint but {mine!r} now"
        return None


def rng_state() -> dict[str, object]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def atomic_save(obj: object, path: Path) -> None:
    """Write ``obj`` to ``path`` whole or not at all: a full disk, a read-only folder or a kill
    leaves the previous file as it was, and no temporary file behind (but on a kill)."""
    # Serialised in memory first: torch.save to a failing file raises an opaque RuntimeError
    # ("unexpected pos"), the bytes' own write an OSError that says what happened.
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # fsync's says no file: name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def save_checkpoint(
    run_dir: Path,
    *,
    step: int,
    identity: RunIdentity,
    adapters: dict[str, dict[str, torch.Tensor]],
    optimizers: Mapping[str, torch.optim.Optimizer],
    schedulers: Mapping[str, torch.optim.lr_scheduler.LRScheduler],
    sampler: Mapping[str, int],
    counters: Mapping[str, float],
    config: JSONRecord | None = None,
) -> Path:
    """Write ``checkpoint.pt`` for a run that has completed ``step`` steps; ``config`` is the run's
    config as it trained (``to_dict``), which ``--resume`` holds ``config.yaml`` to."""
    state = {
        "config": config,
        "step": step,
        "identity": identity.__dict__,
        "adapters": {k: {n: t.detach().cpu().clone() for n, t in v.items()} for k, v in adapters.items()},
        "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
        "schedulers": {k: s.state_dict() for k, s in schedulers.items()},
        "sampler": sampler,
        "counters": counters,
        "rng": rng_state(),
    }
    path = Path(run_dir) / CHECKPOINT
    atomic_save(state, path)
    return path


def load_checkpoint(run_dir: Path, identity: RunIdentity) -> dict[str, Any]:
    """Read the checkpoint and refuse it, before any step, when it belongs to another setup."""
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        raise RunFolderError(f"--resume: {run_dir} has no {CHECKPOINT} yet; start it again without --resume")
    state = read_checkpoint(path, needs=("step", "identity"))
    saved = RunIdentity(**{k: tuple(v) if isinstance(v, list) else v for k, v in state["identity"].items()})
    problem = identity.mismatch(saved)
    if problem:
        raise RunFolderError(f"--resume: incompatible checkpoint in {run_dir}: {problem}")
    return state


def checkpoint_step(run_dir: Path) -> int | None:
    """The step the run folder's checkpoint was saved after, or None when it has none it can read."""
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        return None
    try:
        return int(read_checkpoint(path)["step"])
    except RunFolderError:
        return None


def write_fault(exc: OSError, run_dir: Path) -> RunFolderError | None:
    """A failed write in a run (a full disk, a folder turned read-only) as one line naming the file,
    what the folder still holds and how to go on; None when ``exc`` is no file-system fault."""
    if exc.errno not in WRITE_FAULTS:
        return None
    where = f" {exc.filename}" if exc.filename else ""
    step = checkpoint_step(run_dir)
    kept = (
        f"{run_dir} keeps its checkpoint of step {step}: fix that, then the same command with --resume "
        "continues from it"
        if step is not None
        else f"{run_dir} has no checkpoint yet: fix that and start the run again"
    )
    return RunFolderError(f"cannot write{where} ({exc.strerror or exc}); {kept}")


def prepare_run_dir(run_dir: Path, resume: bool, create: bool = True) -> None:
    """Refuse to overwrite a run; refuse to resume one that is not there; refuse a folder that
    cannot be written (before any model loads: this runs first).

    ``create=False`` only checks (data-parallel ranks all check before rank 0 creates).
    """
    run_dir = Path(run_dir)
    check_writable(run_dir, "--out-dir")
    if resume:
        if not run_dir.is_dir():
            raise RunFolderError(f"--resume: run folder {run_dir} does not exist; drop --resume to start it")
        return
    if run_dir.exists():
        raise RunFolderError(
            f"run folder {run_dir} already exists: pass --resume to continue it, or --out-dir for a new run"
        )
    if create:
        run_dir.mkdir(parents=True)
