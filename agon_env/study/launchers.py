"""Running a study's units side by side: on this machine (:func:`local`) or as Ray tasks (:func:`ray`).

Both start the same child per unit (:func:`agon_env.study.units.command`), which locks the
unit, so a launcher only decides where and how many at once. A launcher takes the units'
specs (name -> spec file) and returns the names that failed, each with its log's tail.
Ray is imported only by :func:`ray` (``pip install 'agon-env[study-ray]'``).
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agon_env.errors import NotInstalled
from agon_env.study.folder import StudyFolder
from agon_env.study.units import Lock, child_env, command, read_unit

_SAY = threading.Lock()


def say(msg: str) -> None:
    # One write per line, under a lock: print() writes the text and its newline separately, so two
    # workers' lines could interleave into one ("a: started[..] b: started").
    line = f"[{time.strftime('%H:%M:%S')}] {msg}\n"
    with _SAY:
        sys.stdout.write(line)
        sys.stdout.flush()


def run_one(spec: Path, log: Path, device: str | None) -> tuple[int, float]:
    """One unit's child, its output appended to ``log``: (exit status, seconds)."""

    unit = read_unit(spec)
    env = child_env(unit, device)
    from agon_env.study.tracking import spec_env

    env.update(spec_env(spec, unit.config))  # --report-to: the unit in its study's group
    if device:
        env["AGON_STUDY_DEVICE"] = device
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with log.open("a") as f:
        rc = subprocess.run(
            command(spec), stdout=f, stderr=subprocess.STDOUT, env=env, check=False
        ).returncode
    return rc, time.perf_counter() - t0


def _tail(log: Path, lines: int = 15) -> str:
    return (
        "".join(log.read_text(errors="replace").splitlines(keepends=True)[-lines:]) if log.is_file() else ""
    )


def local(
    specs: dict[str, Path], logs: Path, workers: int = 1, devices: Sequence[str] = ()
) -> dict[str, str]:
    """``workers`` units at a time on this machine; each takes a free device of ``devices``
    (round robin over the workers) or none. Returns failed unit -> its log's tail."""
    slots: queue.Queue[str | None] = queue.Queue()
    for i in range(max(1, workers)):
        slots.put(devices[i % len(devices)] if devices else None)
    failed: dict[str, str] = {}

    def job(name: str, spec: Path) -> None:
        device = slots.get()
        try:
            from agon_env.study.status import resume_note

            say(f"{name}: started{f' on {device}' if device else ''}{resume_note(spec)}")
            rc, seconds = run_one(spec, logs / f"{name}.log", device)
            if rc:
                failed[name] = _tail(logs / f"{name}.log")
                say(f"{name}: FAILED (exit {rc}); see {logs / f'{name}.log'}")
            else:
                say(f"{name}: done in {seconds:.0f} s")
        finally:
            slots.put(device)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for f in [pool.submit(job, n, s) for n, s in specs.items()]:
            f.result()
    return failed


def ray(
    specs: dict[str, Path],
    logs: Path,
    address: str | None = None,
    cpus_per_unit: float = 1,
    gpus_per_unit: float = 0,
) -> dict[str, str]:
    """Each unit a Ray task with ``cpus_per_unit`` CPUs and ``gpus_per_unit`` GPUs, on the cluster at
    ``address`` (None: a local one; ``auto``: the running one). Every node must see the study
    folder (a shared file system) and have this package installed."""
    try:
        import ray as ray_lib
    except ImportError:
        raise NotInstalled("--launcher ray needs Ray: pip install 'agon-env[study-ray]'") from None

    if not ray_lib.is_initialized():
        kwargs = {"include_dashboard": False} if address is None else {}
        ray_lib.init(address=address, log_to_driver=False, **kwargs)

    from agon_env.study.status import resume_note

    @ray_lib.remote(num_cpus=cpus_per_unit, num_gpus=gpus_per_unit)
    def task(spec: str, log: str) -> tuple[int, float]:
        # Ray sets CUDA_VISIBLE_DEVICES for a task given GPUs: the child sees its own as cuda:0.
        return run_one(Path(spec), Path(log), "cuda" if gpus_per_unit else None)

    notes = {name: resume_note(spec) for name, spec in specs.items()}  # before any child trains on
    since = time.time() - 1  # a file system may keep whole seconds
    refs = {name: task.remote(str(spec), str(logs / f"{name}.log")) for name, spec in specs.items()}
    names = {ref: name for name, ref in refs.items()}
    failed: dict[str, str] = {}
    started: set[str] = set()
    while refs:
        ended, _ = ray_lib.wait(list(refs.values()), num_returns=1, timeout=POLL_S)
        for name in [n for n in refs if n not in started and _started(logs.parent, n, since)]:
            started.add(name)
            say(f"{name}: started (ray){notes[name]}")
        for ref in ended:
            name = names[ref]
            del refs[name]
            rc, seconds = ray_lib.get(ref)
            if rc:
                failed[name] = _tail(logs / f"{name}.log")
                say(f"{name}: FAILED (exit {rc}); see {logs / f'{name}.log'}")
            else:
                say(f"{name}: done in {seconds:.0f} s (ray)")
    return failed


POLL_S = 2.0
"""How often the Ray launcher looks for units that started (a task may wait for a free node)."""


def _started(study: Path, name: str, since: float) -> bool:
    """Whether unit ``name``'s child took its lock after ``since``: the child rewrites the lock
    file with its pid on every acquisition, so its time says so on any node sharing the folder."""
    try:
        return Lock(StudyFolder(study).lock(name)).path.stat().st_mtime >= since
    except FileNotFoundError:
        return False


LAUNCHERS: dict[str, Callable[..., dict[str, str]]] = {"local": local, "ray": ray}
"""``--launcher`` -> the function that runs the units."""
