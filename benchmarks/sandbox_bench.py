"""Sandbox throughput and per-run overhead.

Measures, on this machine:

* per-run latency of a trivial program (``print(1)``), run one at a time, through the sandbox
  (bwrap mode, and the fallback when root) and as a plain ``subprocess.run`` of the same
  interpreter; overhead = sandbox median - plain median;
* the same sandboxed run from a caller holding ``--resident-gb`` of touched memory (a trainer holds
  its model while the env scores code), as a ratio to the bare caller's: spawning must not copy the
  caller (a fork does, page tables and all; the sandbox starts its runs without one);
* checks/s of ``--n`` trivial checks through a :class:`SandboxPool` of ``--workers``;
* checks/s of ``--n`` realistic checks through the same pool: HumanEval canonical solutions
  (one assert-harness run each) and CodeContests sample reference solutions on one stdin/stdout
  case each (skipped when ``../shared/data`` is absent).

    python benchmarks/sandbox_bench.py [--n 60] [--workers 2] [--resident-gb 4]

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from agon_env.envs.tasks.code_checks import IOCase, check_stdio
from agon_env.envs.tasks.codecontests import STDIO_LIMITS, codecontests
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.humaneval import humaneval
from agon_env.sandbox import PYTHON, Limits, SandboxPool, run_python, sandbox_mode

TRIVIAL = "print(1)"


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def plain_run() -> None:
    subprocess.run([PYTHON, "-I", "-c", TRIVIAL], capture_output=True, check=True)


def rate(jobs: list[Callable[[], bool]], workers: int) -> tuple[float, int]:
    """Checks per second running ``jobs`` on ``workers`` threads, and how many returned True."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        ok = sum(ex.map(lambda job: job(), jobs))
    return len(jobs) / (time.perf_counter() - t0), ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--resident-gb", type=float, default=4.0)
    args = ap.parse_args()
    limits = Limits()
    mode = sandbox_mode()
    run_python(TRIVIAL)  # warm caches (page cache of python, bwrap)
    result: dict[str, object] = {"bench": "sandbox", "mode": mode, "n": args.n, "workers": args.workers}

    plain = median_ms(plain_run, args.n)
    sandboxed = median_ms(lambda: run_python(TRIVIAL, "", limits), args.n)
    result.update(
        plain_ms=round(plain, 1), sandbox_ms=round(sandboxed, 1), overhead_ms=round(sandboxed - plain, 1)
    )
    print(
        f"trivial run, median of {args.n}: plain {plain:.1f} ms, {mode} {sandboxed:.1f} ms "
        f"-> overhead {sandboxed - plain:.1f} ms"
    )
    resident = bytearray(int(args.resident_gb * 2**30))
    resident[::4096] = b"\x01" * len(range(0, len(resident), 4096))  # touch every page: it is resident
    held = median_ms(lambda: run_python(TRIVIAL, "", limits), args.n)
    del resident
    result.update(
        resident_gb=args.resident_gb,
        sandbox_ms_resident=round(held, 1),
        resident_over_bare=round(held / sandboxed, 2),
    )
    print(
        f"trivial run from a caller holding {args.resident_gb:g} GB: {held:.1f} ms "
        f"({held / sandboxed:.2f} x the bare caller's)"
    )
    if mode == "bwrap" and os.geteuid() == 0:
        fallback = median_ms(lambda: run_python(TRIVIAL, "", limits, mode="fallback"), args.n)
        result["fallback_ms"] = round(fallback, 1)
        print(f"trivial run, fallback mode: {fallback:.1f} ms")

    with SandboxPool(args.workers, limits) as pool:
        t0 = time.perf_counter()
        outs = pool.map([(TRIVIAL, "")] * args.n)
        trivial_rate = args.n / (time.perf_counter() - t0)
    assert all(r.stdout == "1\n" for r in outs)
    result["trivial_checks_per_s"] = round(trivial_rate, 1)
    print(f"trivial checks through the pool: {trivial_rate:.1f}/s")

    he = humaneval()
    picked = [he[i % len(he)] for i in range(0, args.n * 7, 7)]  # spread over the set
    he_rate, he_ok = rate([partial(he.score, p, p.answer["reference"]) for p in picked], args.workers)
    result.update(humaneval_checks_per_s=round(he_rate, 1), humaneval_passed=f"{he_ok}/{len(picked)}")
    print(
        f"HumanEval canonical solutions (assert harness): {he_rate:.1f} checks/s, {he_ok}/{len(picked)} pass"
    )

    if local_file("codecontests_sample.jsonl") is not None:
        cc = list(codecontests(limit=args.n, split=None))  # the sample's first n, as recorded
        jobs = [
            partial(check_stdio_one, p.answer["reference"], p.answer["tests"][0], STDIO_LIMITS) for p in cc
        ]
        cc_rate, cc_ok = rate(jobs, args.workers)
        result.update(codecontests_checks_per_s=round(cc_rate, 1), codecontests_passed=f"{cc_ok}/{len(cc)}")
        print(f"CodeContests references, 1 stdio case each: {cc_rate:.1f} checks/s, {cc_ok}/{len(cc)} pass")

    result["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}"
    print(json.dumps(result))


def check_stdio_one(program: str, case: IOCase, limits: Limits) -> bool:
    return check_stdio(program, [case], limits).all_passed


if __name__ == "__main__":
    main()
