"""Whether a run's step can fit in this machine's memory, decided before anything is made.

A step holds all of its ``batch_problems × num_generations`` episodes at once (the update
reads every turn of the step), each turn with its tokens, its log-probs and the Python objects
around them. ``--batch-problems 100000000`` or ``--n 100000000`` asked for terabytes and ran
until the kernel killed the process, leaving a half-made run folder; :func:`check_fits`
refuses them up front, stating the estimate and what it was held to.

The estimate is of host memory, and coarse on purpose: it only has to tell an absurd size from
a sane one (the default run: 164 KiB; configs/paper-qwen3-0.6b-deepmath.yaml: 201 MiB):

    episodes × turns × (TURN_BYTES + max_new_tokens × TOKEN_BYTES)

Torch-free: it reads the config and ``/proc/meminfo`` only.
"""

from __future__ import annotations

import os
from pathlib import Path

from agon_env.config import TrainConfig
from agon_env.errors import DoesNotFit

TURNS = 2
"""Turns an episode holds at most (a draft and a challenge); a solo run holds one."""
TURN_BYTES = 4096
"""A turn's fixed cost: its Turn, Completion and observation objects, its prompt's token ids
(a prompt of a few hundred tokens, each a list slot and an int object) and its rendered text."""
TOKEN_BYTES = 80
"""One sampled token: its id and log-prob as list slots and Python objects (~60 B), and its
share of the decoded text."""


def step_bytes(cfg: TrainConfig) -> int:
    """The estimated bytes one training step of ``cfg`` holds at once (the module's formula)."""
    episodes = cfg.batch_problems * cfg.grpo.num_generations
    return episodes * TURNS * (TURN_BYTES + cfg.sampling.max_new_tokens * TOKEN_BYTES)


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Memory this machine can still give a process (``MemAvailable``), or None when unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # unreachable: the loop returns at PiB


def check_fits(cfg: TrainConfig, available: int | None = None) -> None:
    """Refuse, in one line with the estimate, a config whose step cannot fit in memory
    (``available`` bytes; default: what the machine has now). Unknown memory: not refused."""
    available = available_bytes() if available is None else available
    need = step_bytes(cfg)
    if available is None or need <= available:
        return
    raise DoesNotFit(
        f"one step holds batch_problems × grpo.num_generations = {cfg.batch_problems} × "
        f"{cfg.grpo.num_generations} episodes of up to {TURNS} turns, each ~{TURN_BYTES} B + "
        f"sampling.max_new_tokens ({cfg.sampling.max_new_tokens}) × ~{TOKEN_BYTES} B: about {_size(need)}, "
        f"and this machine has {_size(available)} available; lower --batch-problems or "
        "--grpo.num-generations"
    )
