"""Run untrusted Python source: the one and only way model-written code executes in agon-env.

``run_python(code, stdin, limits)`` runs ``code`` as ``main.py`` under ``/usr/bin/python3 -I`` and
returns a :class:`RunResult`; :class:`SandboxPool` runs many with bounded concurrency.

Mode ``"bwrap"`` (used whenever a bubblewrap probe succeeds) gives each run:

* an unprivileged uid. As root we drop to a slot uid (65534, then 65533, ... for concurrent runs,
  each leased machine-wide; ``setpriv``, first in the command) *before* bwrap starts, so bwrap
  itself runs unprivileged in a user namespace. Model code never runs as root: root ignores
  RLIMIT_NPROC, and a bwrap started as root can still read ``/etc/shadow``;
* ``bwrap --unshare-all --die-with-parent --new-session --clearenv``: new user, pid, net (only a
  downed loopback), ipc, uts and cgroup namespaces and an empty environment;
* a filesystem of ``/usr`` read-only, the ``/lib``, ``/lib64``, ``/bin`` symlinks, fresh ``/proc``
  and ``/dev``, and a size-capped tmpfs ``/work`` as cwd. The program is copied in from a memfd.
  Nothing of the project, the dataset or the caller's cwd is bound, so hidden tests are not
  there: expected outputs are compared on the host, inputs arrive through stdin;
* rlimits set by ``prlimit`` before bwrap execs, inherited by everything inside: CPU seconds,
  address space, NPROC, FSIZE, NOFILE, no core files;
* a session of its own, a wall-clock deadline, and stdout/stderr read incrementally with a cap;
  on deadline or cap the run is SIGKILLed (the pid namespace takes every descendant with it);
* a final sweep that SIGKILLs anything left under the slot uid.

Not covered: kernel exploits and side channels (the kernel is shared, no seccomp filter), CPU and
memory contention between concurrent runs beyond the rlimits, packages in ``/usr/bin/python3``'s
dist-packages (importable), and code that tampers with an in-process test harness (assert-style
tests share the interpreter with the code under test; see ``agon_env.envs.tasks.code_checks``).

Mode ``"fallback"`` (bubblewrap missing or unable to make namespaces) warns loudly. As root it keeps
the uid drop, rlimits, ``unshare --net --pid``, the deadline, the output cap and the sweep, but NOT
the filesystem view: the program sees the host filesystem with the slot uid's permissions (world-
readable files are readable, world-writable folders like ``/tmp`` writable, and files left there
stay), and its cwd is a 0700 temp folder with no size cap. Not root, fallback is rlimits, deadline
and output cap only; bwrap mode without root runs as the caller's uid (no sweep). See docs/sandbox.md.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

log = logging.getLogger(__name__)

PYTHON = os.environ.get("AGON_SANDBOX_PYTHON", "/usr/bin/python3")  # readable by the slot uid, under /usr
BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
SLOT_UIDS = tuple(range(65534, 65534 - 16, -1))
_STDERR_TAIL = 2048
# sh is the pid namespace's pid 1: it reaps orphans during the run, and python, as pid 2, still gets
# SIGXCPU (the kernel shields a namespace's pid 1 from it). "; exit" keeps sh from exec-ing python in
# place; sh reports python's death by signal N as 128 + N. (bwrap's own pid-1 reaper is not used:
# bwrap 0.8 leaves it as a zombie for the host's init to reap.)
_LAUNCH = ("/bin/sh", "-c", f"{PYTHON} -I main.py; exit $?")

Status = Literal["ok", "error", "timeout", "killed", "output_limit"]
Mode = Literal["bwrap", "fallback"]


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run."""

    cpu_s: float = 4
    """CPU seconds per process, rounded up to whole seconds (RLIMIT_CPU soft limit: SIGXCPU, then
    SIGKILL one second later)."""
    wall_s: float = 8.0
    """Wall-clock seconds for the whole run, bwrap start-up included; then the group is SIGKILLed."""
    memory_bytes: int = 2 << 30
    """Address space per process (RLIMIT_AS); a bigger allocation raises MemoryError."""
    nproc: int = 64
    """Processes plus threads of the sandbox uid (RLIMIT_NPROC); stops fork bombs."""
    fsize_bytes: int = 16 << 20
    """Largest file the program may write (RLIMIT_FSIZE)."""
    nofile: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    output_bytes: int = 1 << 20
    """Captured stdout plus stderr; past this the run is killed with status ``output_limit``."""
    tmpfs_bytes: int = 64 << 20
    """Size of the ``/work`` tmpfs (bwrap mode only)."""


@dataclass(frozen=True)
class RunResult:
    """Outcome of one run. ``stdout`` is complete unless ``status == "output_limit"``."""

    status: Status
    returncode: int | None
    stdout: str
    stderr_tail: str
    wall_s: float
    cpu_s: float | None = None
    """CPU seconds (user + system) of the run and every process it waited for, from ``wait4``;
    None when the run was killed before it exited (a time-out or the output cap)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@lru_cache(maxsize=1)
def sandbox_mode() -> Mode:
    """``"bwrap"`` when a bubblewrap probe run succeeds here, else ``"fallback"`` (with a warning)."""
    reason = ""
    if not os.path.exists(BWRAP):
        reason = f"{BWRAP} not found (apt-get install bubblewrap)"
    else:
        with _UidLease() as uid:
            cmd = [*_as_slot(uid), BWRAP, *_bwrap_args(Limits(), None), "/usr/bin/true"]
            probe = subprocess.run(cmd, capture_output=True, timeout=30, **_spawn_kwargs())
        if probe.returncode == 0:
            return "bwrap"
        reason = f"bwrap probe failed: {probe.stderr.decode(errors='replace').strip()[:300]}"
    msg = f"SANDBOX FALLBACK: {reason}. Model code runs WITHOUT filesystem isolation; see docs/sandbox.md"
    warnings.warn(msg, RuntimeWarning, stacklevel=2)
    log.warning(msg)
    return "fallback"


def run_python(
    code: str, stdin: str = "", limits: Limits | None = None, mode: Mode | None = None
) -> RunResult:
    """Run ``code`` as ``main.py`` under the sandbox, feeding ``stdin``. Never raises on program behaviour."""
    limits = limits or Limits()
    mode = mode or sandbox_mode()
    if not os.path.exists(PYTHON):
        raise FileNotFoundError(f"{PYTHON} is missing: the sandbox needs a system Python outside /root")
    with _UidLease() as uid:
        if mode == "bwrap":
            return _run_bwrap(code, stdin, limits, uid)
        return _run_fallback(code, stdin, limits, uid)


class SandboxPool:
    """Bounded concurrency for sandboxed runs. Threads only wait on subprocesses, so the GIL is idle."""

    def __init__(self, max_workers: int = 2, limits: Limits | None = None, mode: Mode | None = None) -> None:
        if not 1 <= max_workers <= len(SLOT_UIDS):
            raise ValueError(f"max_workers must be in 1..{len(SLOT_UIDS)}, got {max_workers}")
        self.max_workers = max_workers
        self.limits = limits or Limits()
        self.mode = mode
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="agon-sandbox")

    def submit(self, code: str, stdin: str = "", limits: Limits | None = None) -> Future[RunResult]:
        return self._executor.submit(run_python, code, stdin, limits or self.limits, self.mode)

    def map(self, jobs: Iterable[tuple[str, str]], limits: Limits | None = None) -> list[RunResult]:
        """Run ``(code, stdin)`` pairs concurrently; results in input order."""
        futures = [self.submit(code, stdin, limits) for code, stdin in jobs]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_root() -> bool:
    return os.geteuid() == 0


class _UidLease:
    """Hold one slot uid exclusively, machine-wide, so the post-run sweep only hits our own run.

    The lock is an abstract unix socket: no file to leave behind, released when the process dies.
    """

    def __enter__(self) -> int:
        self.sock: socket.socket | None = None
        if not _is_root():
            return os.getuid()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for uid in SLOT_UIDS:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.bind(f"\0agon-sandbox-uid-{uid}")
                except OSError:
                    sock.close()
                    continue
                self.sock = sock
                return uid
            time.sleep(0.01)
        raise RuntimeError(f"no free sandbox uid among {SLOT_UIDS} after 120 s")

    def __exit__(self, *exc: object) -> None:
        if self.sock is not None:
            self.sock.close()


def _live_pids(uid: int) -> dict[int, int]:
    """Non-zombie processes whose real uid is ``uid``, mapped to their thread counts."""
    pids: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        zombie = fields.get("State", "").strip().startswith("Z")
        if int(fields.get("Uid", "-1").split()[0]) == uid and not zombie:
            pids[int(name)] = int(fields.get("Threads", "1"))
    return pids


def _sweep(uid: int, spare: int | None = None) -> None:
    """SIGKILL everything under a dedicated slot uid but ``spare``; loop because a fork bomb races us."""
    if not _is_root():
        return  # the uid is the caller's own: never kill it wholesale
    for _ in range(200):
        pids = [p for p in _live_pids(uid) if p != spare]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
    log.error("sandbox uid %d still has processes after the sweep", uid)


def _spawn_kwargs() -> dict:
    return {"start_new_session": True, "cwd": "/", "env": {}, "close_fds": True}


def _as_slot(uid: int) -> list[str]:
    """The command prefix that drops root to the slot ``uid`` (every uid and gid, no groups) before
    anything else execs; nothing when not root.

    Not Popen's ``user=``/``group=``: with those CPython cannot vfork and forks the caller instead,
    copying its page tables, which costs ~0.14 s per run from a process holding 4 GB (a trainer with
    its model) against ~2 ms this way (docs/sandbox.md, "What a run costs")."""
    if not _is_root() or uid == 0:
        return []
    return ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _prlimit_args(limits: Limits, uid: int) -> list[str]:
    nproc = limits.nproc
    if not _is_root():
        # NPROC counts every task of the uid machine-wide; leave room for the caller's own.
        nproc += sum(_live_pids(uid).values())
    # The CPU hard limit sits one second above the soft one so SIGXCPU (-> "timeout") comes first.
    # RLIMIT_CPU is whole seconds and prlimit truncates "5.0:6.0" to 5:5, so a float limit would get
    # SIGKILL with SIGXCPU and read as "killed": round up to an int first.
    cpu = math.ceil(limits.cpu_s)
    return [
        "/usr/bin/prlimit",
        f"--cpu={cpu}:{cpu + 1}",
        f"--as={limits.memory_bytes}",
        f"--nproc={nproc}",
        f"--fsize={limits.fsize_bytes}",
        f"--nofile={limits.nofile}",
        "--core=0",
        "--",
    ]


def _bwrap_args(limits: Limits, program_fd: int | None) -> list[str]:
    args = [
        *("--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--as-pid-1"),
        *("--uid", "65534", "--gid", "65534"),
        *("--ro-bind", "/usr", "/usr"),
        *("--symlink", "usr/lib", "/lib"),
        *("--symlink", "usr/lib64", "/lib64"),
        *("--symlink", "usr/bin", "/bin"),
        *("--proc", "/proc"),
        *("--dev", "/dev"),
        *("--size", str(limits.tmpfs_bytes), "--tmpfs", "/work"),
        *("--chdir", "/work"),
        *("--setenv", "PATH", "/usr/bin"),
        *("--setenv", "HOME", "/work"),
    ]
    if program_fd is not None:
        args += ["--file", str(program_fd), "/work/main.py"]
    return [*args, "--"]


def _run_bwrap(code: str, stdin: str, limits: Limits, uid: int) -> RunResult:
    fd = os.memfd_create("agon-program")
    try:
        os.write(fd, code.encode("utf-8", errors="surrogatepass"))
        os.lseek(fd, 0, os.SEEK_SET)
        cmd = [*_as_slot(uid), *_prlimit_args(limits, uid), BWRAP, *_bwrap_args(limits, fd), *_LAUNCH]
        kwargs = _spawn_kwargs()
        kwargs["pass_fds"] = (fd,)
        return _execute(cmd, kwargs, stdin, limits, uid)
    finally:
        os.close(fd)


def _run_fallback(code: str, stdin: str, limits: Limits, uid: int) -> RunResult:
    workdir = tempfile.mkdtemp(prefix="agon-sandbox-")
    try:
        with open(os.path.join(workdir, "main.py"), "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(code)
        cmd = [*_prlimit_args(limits, uid), *_LAUNCH]
        if _is_root():
            os.chown(workdir, uid, uid)
            drop = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
            # A pid namespace too: orphans die with the program and the kernel reaps them, instead of
            # piling up as zombies (which NPROC counts) under an init that may never reap them.
            unshare = ["/usr/bin/unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
            cmd = [*unshare, "--", "/usr/bin/setpriv", *drop, "--", *cmd]
        kwargs = _spawn_kwargs()  # root stays root until unshare has made the namespaces
        kwargs.update(cwd=workdir, env={"PATH": "/usr/bin", "HOME": workdir})
        return _execute(cmd, kwargs, stdin, limits, uid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _execute(cmd: list[str], kwargs: dict, stdin: str, limits: Limits, uid: int) -> RunResult:
    start = time.monotonic()
    pipe = subprocess.PIPE
    proc = subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=pipe, **kwargs)
    child = _Reaper(proc)
    try:
        out, err, stop = _pump(child, stdin.encode("utf-8", errors="surrogatepass"), limits, start)
    finally:
        if child.poll() is None:
            _stop(proc, uid)
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        _sweep(uid)
    rc = proc.returncode
    # bwrap and the fallback's sh both report a death by signal N as exit status 128 + N.
    sig = -rc if rc < 0 else max(rc - 128, 0)
    cpu = child.cpu_s if stop is None else None  # a run we killed: its usage is not the program's
    if stop is None:
        stop = _status(rc, sig)
    tail = err[-_STDERR_TAIL:].decode("utf-8", errors="replace")
    text = out[: limits.output_bytes].decode("utf-8", errors="replace")
    return RunResult(stop, rc, text, tail, time.monotonic() - start, cpu)


class _Reaper:
    """Reaps the run's direct child with ``wait4``, keeping its CPU time (``Popen.poll`` and
    ``wait`` reap with ``waitpid``, which drops it). The child's usage includes every descendant
    it waited for: the sandbox's sh waits for python, and the assert judge for the program."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.cpu_s: float | None = None

    def poll(self) -> int | None:
        if self.proc.returncode is None:
            try:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: no usage to keep
                return self.proc.poll()
            if pid == 0:
                return None
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_s = usage.ru_utime + usage.ru_stime
        return self.proc.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (rc := self.poll()) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
            time.sleep(0.005)
        return rc


def _status(rc: int, sig: int) -> Status:
    """How a run that met neither the deadline nor the output cap ended."""
    if sig == signal.SIGXCPU:  # the CPU soft limit: the program ran out of CPU time
        return "timeout"
    if sig:  # any other signal (the CPU hard limit's SIGKILL, a crash, the OOM killer)
        return "killed"
    if rc == 0:
        return "ok"
    return "error"


def _stop(proc: subprocess.Popen, uid: int) -> None:
    """Kill a run still going. As root, kill the slot uid's processes but our direct child first, so
    each namespace's parent reaps its pid 1 and no zombie is handed to an init that may not reap it.
    """
    if _is_root():
        _sweep(uid, spare=proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _pump(child: _Reaper, data: bytes, limits: Limits, start: float) -> tuple[bytes, bytes, Status | None]:
    """Feed stdin and drain stdout/stderr until exit, deadline or output cap (the caller then kills)."""
    proc = child.proc
    assert proc.stdin and proc.stdout and proc.stderr
    sel = selectors.DefaultSelector()
    out, err = bytearray(), bytearray()
    total, view = 0, memoryview(data)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        os.set_blocking(pipe.fileno(), False)
    if data:
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    deadline = start + limits.wall_s
    try:
        while len(sel.get_map()) > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(out), bytes(err), "timeout"
            # An orphan (fallback mode) can hold the pipes open after the program exits, so once
            # it has exited we only drain what is already buffered.
            exited = child.poll() is not None
            events = sel.select(0 if exited else min(remaining, 0.1))
            if exited and not events:
                break
            for key, _ in events:
                if key.fileobj is proc.stdin:
                    try:
                        view = view[os.write(proc.stdin.fileno(), view[:65536]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program stopped reading; the rest is moot
                        view = view[:0]
                    if not view:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                total += len(chunk)
                key.data.extend(chunk)
                if key.data is err and len(err) > 2 * _STDERR_TAIL:
                    del err[:-_STDERR_TAIL]
                if total > limits.output_bytes:
                    return bytes(out), bytes(err), "output_limit"
        remaining = deadline - time.monotonic()
        try:
            child.wait(timeout=max(remaining, 0))
        except subprocess.TimeoutExpired:
            return bytes(out), bytes(err), "timeout"
        return bytes(out), bytes(err), None
    finally:
        sel.close()
