"""Checkpoints: everything a killed run needs to continue as if it had never stopped.

One file, ``checkpoint.pt``, holds the adapters' LoRA weights, each adapter's optimiser
and scheduler, the Python / NumPy / torch RNG states, the data sampler's position, the
the step, and the identity of the run (base model, adapter
set, LoRA shape). It is written to a temporary file and moved into place with
``os.replace``, so a SIGKILL at any moment leaves either the previous checkpoint or the
new one, never a torn file.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agon_env.run_folder import CHECKPOINT, RunFolderError


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


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(
    run_dir: Path,
    *,
    step: int,
    identity: RunIdentity,
    adapters: dict[str, dict[str, torch.Tensor]],
    optimizers: dict[str, Any],
    schedulers: dict[str, Any],
    sampler: dict[str, Any],
    counters: dict[str, Any],
) -> Path:
    """Write ``checkpoint.pt`` for a run that has completed ``step`` steps."""
    state = {
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
    state = torch.load(path, map_location="cpu", weights_only=False)
    saved = RunIdentity(**{k: tuple(v) if isinstance(v, list) else v for k, v in state["identity"].items()})
    problem = identity.mismatch(saved)
    if problem:
        raise RunFolderError(f"--resume: incompatible checkpoint in {run_dir}: {problem}")
    return state


def prepare_run_dir(run_dir: Path, resume: bool, create: bool = True) -> None:
    """Refuse to overwrite a run; refuse to resume one that is not there.

    ``create=False`` only checks (data-parallel ranks all check before rank 0 creates).
    """
    run_dir = Path(run_dir)
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
