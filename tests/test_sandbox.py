"""The sandbox contains hostile code, reports it as a failed case, and leaves the host as it was.

Each adversarial program is written so that, even if containment failed, it stays bounded and
harmless here (a fixed number of sleeping forks, a lazily-zeroed allocation, a tmp canary, ...).
A successful attack prints ``PWNED``; each is run as a stdin/stdout case that expects ``PWNED``,
so it must come back as a non-passed case, and the host-side evidence is checked directly.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path

import pytest

from agon_env.envs.tasks.code_checks import IOCase, check_stdio
from agon_env.sandbox import SLOT_UIDS, Limits, SandboxPool, _live_pids, run_python, sandbox_mode

ROOT = os.geteuid() == 0
FAST = Limits(cpu_s=2, wall_s=4.0)
HAS_BWRAP = sandbox_mode() == "bwrap"
MODES = [
    pytest.param("bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap cannot run here")),
    # As non-root the fallback is rlimits only (documented), so its containment is tested as root.
    pytest.param("fallback", marks=pytest.mark.skipif(not ROOT, reason="fallback isolation needs root")),
]
_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")


def _scratch_state() -> set[str]:
    """Entries in world-writable folders that the sandbox could leave behind."""
    found = set()
    for d in _SCRATCH:
        for entry in os.scandir(d) if os.path.isdir(d) else ():
            try:
                owner = entry.stat(follow_symlinks=False).st_uid
            except FileNotFoundError:
                continue
            if owner in SLOT_UIDS or entry.name.startswith("agon-sandbox-"):
                found.add(entry.path)
    return found


@pytest.fixture
def host_unchanged():
    """After the test: no process of any sandbox uid alive, no sandbox files in scratch folders."""
    before = _scratch_state()
    yield
    leftovers = {uid: _live_pids(uid) for uid in SLOT_UIDS}
    assert not any(leftovers.values()), f"processes left behind: {leftovers}"
    assert _scratch_state() <= before, f"files left behind: {_scratch_state() - before}"


def _attack(code: str, mode: str, limits: Limits = FAST) -> tuple[str, float]:
    """Run ``code`` as a case expecting PWNED; it must not pass. Returns (case status, seconds)."""
    start = time.monotonic()
    with SandboxPool(1, mode=mode) as pool:  # type: ignore[arg-type]
        report = check_stdio(code, [IOCase("", "PWNED")], limits, pool=pool)
    assert not report.all_passed, report
    return report.cases[0].status, time.monotonic() - start


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_infinite_loop_times_out(mode, host_unchanged):
    status, secs = _attack("while True:\n    pass\nprint('PWNED')", mode)
    assert status == "timed_out" and secs < 15


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_a_float_cpu_limit_still_reads_as_a_timeout(mode, host_unchanged):
    # prlimit truncated "1.0:2.0" to 1:1, so SIGKILL came with SIGXCPU and the run read as "killed".
    run = run_python("while True:\n    pass", "", Limits(cpu_s=1.0, wall_s=15.0), mode=mode)
    assert run.status == "timeout", run


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_sleeping_program_hits_the_wall_clock(mode, host_unchanged):
    status, secs = _attack("import time\ntime.sleep(300)\nprint('PWNED')", mode)
    assert status == "timed_out" and FAST.wall_s <= secs < FAST.wall_s + 10


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_is_capped_by_nproc(mode, host_unchanged):
    # Only the parent forks, at most 2000 times, and children just sleep: bounded even uncontained.
    code = (
        "import os, time\nn = 0\nfor _ in range(2000):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
        "    n += 1\nprint('PWNED' if n == 2000 else n)"
    )
    status, _ = _attack(code, mode)
    assert status == "failed"
    forks = int(run_python(code, "", FAST, mode=mode).stdout)
    assert 0 < forks <= FAST.nproc


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_allocating_8_gb_fails(mode, host_unchanged):
    # bytearray(n) is calloc'ed: pages stay untouched, so even an uncapped run costs no real memory.
    status, _ = _attack("x = bytearray(8 << 30)\nprint('PWNED')", mode)
    assert status == "crashed"
    assert "MemoryError" in run_python("x = bytearray(8 << 30)", "", FAST, mode=mode).stderr_tail


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_writing_1_gb_fails(mode, host_unchanged):
    code = "with open('big', 'wb') as f:\n    for _ in range(1024):\n        f.write(bytes(1 << 20))\n"
    code += "print('PWNED')"
    status, _ = _attack(code, mode)
    assert status == "crashed"
    assert "File too large" in run_python(code, "", FAST, mode=mode).stderr_tail


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_cannot_reach_a_host_listener_on_loopback(mode, host_unchanged):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        port = server.getsockname()[1]
        code = (
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "s.sendall(b'leak')\nprint('PWNED')"
        )
        status, _ = _attack(code, mode)
        assert status == "crashed"
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_cannot_read_etc_shadow(mode, host_unchanged):
    assert Path("/etc/shadow").exists()
    status, _ = _attack("print('PWNED', open('/etc/shadow').read())", mode)
    assert status == "crashed"
    run = run_python("print(open('/etc/shadow').read())", "", FAST, mode=mode)
    assert run.status == "error" and "root:" not in run.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_cannot_read_the_parent_environment(mode, host_unchanged, monkeypatch):
    secret = "agon-secret-5b1f0c"
    monkeypatch.setenv("AGON_TEST_SECRET", secret)
    # Looks in its own environment and in every /proc/*/environ it can open.
    code = (
        "import os\nfound = any('agon-secret' in v for v in os.environ.values())\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n    try:\n"
        "        found |= b'agon-secret' in open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except OSError:\n        pass\nprint('PWNED' if found else sorted(os.environ))"
    )
    status, _ = _attack(code, mode)
    assert status == "failed"
    assert secret not in run_python(code, "", FAST, mode=mode).stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_cannot_delete_files_in_the_callers_cwd(mode, host_unchanged, tmp_path, monkeypatch):
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    monkeypatch.chdir(tmp_path)
    code = (
        "import os, shutil\ngone = 0\n"
        f"for target in [{str(canary)!r}, os.path.join(os.getcwd(), 'canary.txt')]:\n"
        "    try:\n        os.remove(target)\n        gone += 1\n    except OSError:\n        pass\n"
        f"shutil.rmtree({str(tmp_path)!r}, ignore_errors=True)\nprint('PWNED' if gone else 'kept')"
    )
    status, _ = _attack(code, mode)
    assert status == "failed"
    assert canary.read_text() == "still here"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_orphan_does_not_outlive_the_run(mode, host_unchanged):
    # The grandchild detaches (double fork + setsid) and would print PWNED a second later.
    code = (
        "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(1)\n        print('PWNED', flush=True)\n        time.sleep(20)\n"
        "    os._exit(0)\nprint('parent done', flush=True)"
    )
    status, secs = _attack(code, mode)
    assert status == "failed" and secs < 5
    # host_unchanged asserts no process of the sandbox uids is left


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_printing_100_mb_is_cut_off(mode, host_unchanged):
    code = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))\nprint('PWNED')"
    status, secs = _attack(code, mode)
    assert status == "crashed" and secs < 10
    run = run_python(code, "", FAST, mode=mode)
    assert run.status == "output_limit" and len(run.stdout) <= FAST.output_bytes


# --- ordinary behaviour --------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap cannot run here")
def test_bwrap_view_is_minimal_and_unprivileged(host_unchanged):
    code = (
        "import os, resource as r\nprint(os.getuid(), os.getgid(), os.getcwd(), sorted(os.listdir('/')))\n"
        "print([r.getrlimit(x)[0] for x in (r.RLIMIT_AS, r.RLIMIT_NPROC, r.RLIMIT_FSIZE, r.RLIMIT_NOFILE, "
        "r.RLIMIT_CORE)])"
    )
    lines = run_python(code, "", FAST).stdout.splitlines()
    assert lines[0] == "65534 65534 /work ['bin', 'dev', 'lib', 'lib64', 'proc', 'usr', 'work']"
    assert lines[1] == str([FAST.memory_bytes, FAST.nproc, FAST.fsize_bytes, FAST.nofile, 0])


@pytest.mark.skipif(not ROOT, reason="the uid drop happens only when the caller is root")
@pytest.mark.parametrize("mode", MODES)
def test_sandboxed_processes_never_run_as_root_on_the_host(mode, host_unchanged):
    with SandboxPool(1, mode=mode) as pool:  # type: ignore[arg-type]
        future = pool.submit("import time\ntime.sleep(1.5)", "", FAST)
        seen: set[int] = set()  # real uids of every process on the host running the program
        while not future.done():
            for entry in Path("/proc").iterdir():
                with contextlib.suppress(OSError):
                    if entry.name.isdigit() and b"-I\x00main.py" in (entry / "cmdline").read_bytes():
                        status = (entry / "status").read_text()
                        seen.add(int(status.split("\nUid:")[1].split()[0]))
            time.sleep(0.05)
        assert future.result().status == "ok"
    assert seen and seen <= set(SLOT_UIDS)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_is_spawned_without_copying_the_caller(mode, host_unchanged, monkeypatch):
    # CPython forks (copying the caller's page tables: ~0.14 s a run from a 4 GB trainer) instead of
    # vforking when Popen is asked to change uid, gid or groups, or given a preexec_fn; the uid drop
    # is the command's own (setpriv), and the program still runs as the slot uid (the tests above).
    import subprocess

    asked: list[dict] = []
    real = subprocess.Popen

    def spy(*args, **kwargs):
        asked.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    assert run_python("print(1)", "", FAST, mode=mode).stdout == "1\n"
    assert asked and all(not {"user", "group", "extra_groups", "preexec_fn"} & set(kw) for kw in asked)


@pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap cannot run here")
def test_work_tmpfs_is_size_capped(host_unchanged):
    limits = Limits(fsize_bytes=1 << 30, tmpfs_bytes=8 << 20)
    code = "with open('f', 'wb') as f:\n    for _ in range(32):\n        f.write(bytes(1 << 20))"
    run = run_python(code, "", limits)
    assert run.status == "error" and "No space left" in run.stderr_tail


def test_stdin_stdout_and_exit_statuses(host_unchanged):
    assert run_python("print(input()[::-1])", "héllo\n", FAST).stdout == "olléh\n"
    big = "y" * 3_000_000  # larger than a pipe buffer, both ways
    roomy = Limits(output_bytes=8 << 20)
    assert run_python(
        "import sys; s = sys.stdin.read(); print(len(s)); print(s)", big, roomy
    ).stdout.split() == [
        "3000000",
        big,
    ]
    err = run_python("import sys; sys.stderr.write('boom'); sys.exit(3)", "", FAST)
    assert (err.status, err.returncode, err.stderr_tail) == ("error", 3, "boom")
    killed = run_python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "", FAST)
    assert killed.status == "killed"
    cpu = run_python("while True: pass", "", Limits(cpu_s=1, wall_s=10))
    assert cpu.status == "timeout" and cpu.wall_s < 5  # SIGXCPU, well before the wall clock


def test_pool_runs_concurrently_and_keeps_order(host_unchanged):
    jobs = [(f"import time; time.sleep(0.5); print({i})", "") for i in range(4)]
    start = time.monotonic()
    with SandboxPool(2) as pool:
        results = pool.map(jobs, FAST)
    assert [r.stdout.strip() for r in results] == ["0", "1", "2", "3"]
    assert time.monotonic() - start < 1.9  # 4 x 0.5 s on 2 workers, not 2 s in series


def test_pool_rejects_bad_sizes():
    with pytest.raises(ValueError):
        SandboxPool(0)
    with pytest.raises(ValueError):
        SandboxPool(len(SLOT_UIDS) + 1)
