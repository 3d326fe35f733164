"""Test formats for code answers, run through :mod:`agon_env.sandbox`.

Two formats:

* **stdin/stdout cases** (CodeContests): the program runs once per case with the case input on
  stdin, in its own sandbox; its stdout is compared on the host with the expected output as
  whitespace-separated tokens (like Codeforces' ``wcmp`` checker), optionally with a float
  tolerance. The program never sees expected outputs.
* **assert cases** (MBPP, HumanEval): one sandbox run of a two-process harness. A trusted judge
  process runs the setup code and every test snippet itself; the program lives in a second
  process, forked before the judge reads the tests, that only answers calls to its functions
  with plain data (see ``_HARNESS``). An ``AssertionError`` is a *failed* case, any other
  exception a *crashed* one. What this defends: exiting early or crashing (the case is not
  passed), forging reports or patching the test machinery (the judge's memory, stdout and
  file descriptors are out of the program's reach), objects that rig comparisons (only exact
  builtin types cross the pipe), and reading the tests or expected values (they are never in
  the program's process). What it does not: a program that detects it is being tested in
  some other way and still computes the right values -- which is solving the task.

Results are a :class:`CheckReport` of per-case :class:`CaseResult` (passed / failed / timed_out /
crashed / skipped) with a short detail such as a stderr tail. Comparison and parsing helpers are pure.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agon_env.sandbox import Limits, RunResult, SandboxPool, run_python

CaseStatus = Literal["passed", "failed", "timed_out", "crashed", "skipped"]
_DETAIL = 400


@dataclass(frozen=True)
class IOCase:
    """One stdin/stdout test."""

    input: str
    output: str


@dataclass(frozen=True)
class CaseResult:
    status: CaseStatus
    detail: str = ""


@dataclass(frozen=True)
class CheckReport:
    cases: tuple[CaseResult, ...]

    @property
    def all_passed(self) -> bool:
        return len(self.cases) > 0 and all(c.status == "passed" for c in self.cases)

    @property
    def n_passed(self) -> int:
        return sum(c.status == "passed" for c in self.cases)

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.cases:
            counts[c.status] = counts.get(c.status, 0) + 1
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no cases"


_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL | re.IGNORECASE)


def strip_code_fence(text: str) -> str:
    """The code in an answer: the first ```/```python fenced block if there is one, else the text.

    Leading indentation is kept (a HumanEval answer may be an indented function body).
    """
    m = _FENCE.search(text)
    code = m.group(1) if m else text
    return code.strip("\n").rstrip()


def _is_close(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    except ValueError:
        return False


def outputs_match(got: str, expected: str, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Token-wise equality, ignoring all whitespace differences; numbers within tolerance if given."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    tolerant = rel_tol > 0 or abs_tol > 0
    return all(x == y or (tolerant and _is_close(x, y, rel_tol, abs_tol)) for x, y in zip(a, b, strict=True))


_TOL_PHRASE = re.compile(r"(?:absolute|relative)\s+(?:or\s+(?:absolute|relative)\s+)?error", re.IGNORECASE)
_TOL_VALUE = re.compile(r"10\s*(?:\^\s*\{?\s*|\s)-\s*(\d+)\s*\}?")


def tolerance_from_statement(statement: str) -> float | None:
    """The float tolerance a problem statement grants ("absolute or relative error ... 10^{-6}")."""
    for m in _TOL_PHRASE.finditer(statement):
        v = _TOL_VALUE.search(statement, m.end(), m.end() + 200)
        if v:
            return 10.0 ** -int(v.group(1))
    return None


def _tail(text: str) -> str:
    return text[-_DETAIL:]


def judge_io(run: RunResult, case: IOCase, rel_tol: float = 0.0, abs_tol: float = 0.0) -> CaseResult:
    """Turn one sandbox run of a stdin/stdout case into a case result."""
    if run.status == "timeout":
        return CaseResult("timed_out", f"over the time limit after {run.wall_s:.1f} s")
    if run.status == "output_limit":
        return CaseResult("crashed", "killed: output over the cap")
    if run.status != "ok":
        return CaseResult("crashed", f"{run.status} (exit {run.returncode}): {_tail(run.stderr_tail)}")
    if outputs_match(run.stdout, case.output, rel_tol, abs_tol):
        return CaseResult("passed")
    return CaseResult("failed", f"expected {case.output[:150]!r}, got {run.stdout[:150]!r}")


def check_stdio(
    program: str,
    cases: Sequence[IOCase],
    limits: Limits | None = None,
    *,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    fail_fast: bool = True,
    total_wall_s: float | None = None,
    pool: SandboxPool | None = None,
) -> CheckReport:
    """Run ``program`` on each case. With ``fail_fast`` the cases after the first failure are skipped;
    after ``total_wall_s`` the rest are skipped (so the whole check ends within it plus one case's
    ``limits.wall_s``). A ``pool`` runs cases concurrently.
    """
    limits = limits or Limits()
    deadline = time.monotonic() + total_wall_s if total_wall_s is not None else math.inf
    get: Callable[[int], RunResult]
    futures = [pool.submit(program, c.input, limits) for c in cases] if pool is not None else []
    if futures:
        get = lambda i: futures[i].result()  # noqa: E731
    else:
        get = lambda i: run_python(program, cases[i].input, limits)  # noqa: E731
    results: list[CaseResult] = []
    skip_reason = ""
    for i, case in enumerate(cases):
        if skip_reason:
            if futures:
                futures[i].cancel()
            results.append(CaseResult("skipped", skip_reason))
            continue
        result = judge_io(get(i), case, rel_tol, abs_tol)
        results.append(result)
        if fail_fast and result.status != "passed":
            skip_reason = f"not run: case {i} {result.status}"
        elif time.monotonic() > deadline:
            skip_reason = "not run: total time budget spent"
    return CheckReport(tuple(results))


# Runs inside the sandbox as two processes. The trusted *judge* forks the *program* process
# before it reads anything, so the program's memory never holds a test, an expected value or
# the report nonce. The program process loads the answer and then only answers calls: the
# judge runs every test itself with the program's functions replaced by stubs that send the
# arguments down a pipe and take back the return value -- as plain data only (exact builtin
# types, tagged so tuples, sets and dicts survive), so an object with a rigged ``__eq__``
# cannot reach a comparison. The judge makes itself non-dumpable, so the program process
# (same uid) can neither ptrace it nor open its file descriptors through /proc. Exiting
# early, printing fake reports (the program's stdout is its stderr) or patching assert,
# builtins or the test code therefore cannot pass a test: only correct return values can.
_HARNESS = r"""
import ctypes, json, os, sys, traceback

SCALARS = {int: "i", float: "f", str: "s", bool: "b", type(None): "n"}
CONTAINERS = {list: "l", tuple: "t", set: "S", frozenset: "F"}

class NotPlain(Exception):
    pass

def enc(x, other, depth=0):
    # Exact builtin types only (a subclass may rig __eq__); anything else goes to ``other``.
    t = type(x)
    if depth > 50:
        raise NotPlain("data nested too deep")
    if t in SCALARS:
        if t is float and (x != x or x in (float("inf"), -float("inf"))):
            return ["f", repr(x)]
        return [SCALARS[t], x]
    if t is bytes:
        return ["y", x.hex()]
    if t is complex:
        return ["c", [x.real, x.imag]]
    if t in CONTAINERS:
        return [CONTAINERS[t], [enc(v, other, depth + 1) for v in x]]
    if t is dict:
        return ["d", [[enc(k, other, depth + 1), enc(v, other, depth + 1)] for k, v in x.items()]]
    return other(x)

def dec(x, handle):
    tag, v = x
    if tag == "h":
        return handle(v)
    if tag == "y":
        return bytes.fromhex(v)
    if tag == "c":
        return complex(*v)
    if tag == "f":
        return float(v)
    if tag in ("i", "s", "b", "n"):
        return v
    if tag == "d":
        return {dec(k, handle): dec(w, handle) for k, w in v}
    return {"l": list, "t": tuple, "S": set, "F": frozenset}[tag](dec(w, handle) for w in v)

def tail():
    return traceback.format_exc()[-400:]

def program_side(inbox, outbox):
    # Untrusted from here on: load the answer, then answer requests until the judge hangs up.
    os.dup2(2, 1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    rd, wr = os.fdopen(inbox, "r"), os.fdopen(outbox, "w", buffering=1)

    def send(msg):
        wr.write(json.dumps(msg) + "\n")
        wr.flush()

    env = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        exec(compile(json.loads(rd.readline()), "solution.py", "exec"), env)
    except BaseException:
        send({"error": tail()})
        os._exit(0)
    send({"names": [k for k, v in env.items() if callable(v) and not k.startswith("__")]})
    objects = []  # program objects the judge holds by handle (it never holds them by value)

    def keep(obj):
        if type(obj).__module__ == "numpy" and hasattr(obj, "item"):
            return enc(obj.item(), keep)  # a numpy scalar stands for the builtin it holds
        objects.append(obj)
        return ["h", len(objects) - 1]

    for line in rd:
        req = json.loads(line)
        try:
            args = dec(req["args"], objects.__getitem__)
            kwargs = dec(req["kwargs"], objects.__getitem__)
            if req["op"] == "call":
                value = env[req["name"]](*args, **kwargs)
            elif req["op"] == "getattr":
                value = getattr(objects[req["handle"]], req["name"])
            elif req["op"] == "setattr":
                value = setattr(objects[req["handle"]], req["name"], *args)
            else:
                value = objects[req["handle"]](*args, **kwargs)
            send({"value": enc(value, keep)})
        except BaseException as e:
            send({"raised": type(e).__name__, "detail": tail()})
    os._exit(0)

def judge():
    try:  # PR_SET_DUMPABLE = 4: no ptrace, no /proc/<pid>/{mem,fd} for the program's process
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass
    to_prog, from_judge = os.pipe()
    to_judge, from_prog = os.pipe()
    if os.fork() == 0:
        os.close(from_judge)
        os.close(to_judge)
        program_side(to_prog, from_prog)
    os.close(to_prog)
    os.close(from_prog)
    wr, rd = os.fdopen(from_judge, "w", buffering=1), os.fdopen(to_judge, "r")
    payload = json.loads(sys.stdin.read())  # only now: the program's memory never held the tests
    nonce = payload["nonce"]

    def emit(*parts):
        sys.stdout.write(nonce + " " + json.dumps(parts) + "\n")
        sys.stdout.flush()

    def ask(msg):
        wr.write(json.dumps(msg) + "\n")
        wr.flush()
        line = rd.readline()
        if not line:
            raise RuntimeError("the program's process ended")
        return json.loads(line)

    class Remote:
        # A program object the tests may use (attributes, methods) but never compare: its own
        # __eq__ runs in the program's process, so no verdict may depend on it.
        def __init__(self, handle):
            object.__setattr__(self, "_h", handle)

        def __getattr__(self, name):
            return request("getattr", name, handle=self._h)

        def __setattr__(self, name, value):
            request("setattr", name, [value], handle=self._h)

        def __call__(self, *args, **kwargs):
            return request("callh", "", args, kwargs, handle=self._h)

        def __repr__(self):
            return "<program object #%d>" % self._h

        def _refuse(self, *args):
            raise TypeError("a test compared or used a program object, not plain data")

        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = _refuse
        __hash__ = None

    def out(x):
        if isinstance(x, Remote):
            return ["h", x._h]
        raise TypeError("cannot pass a " + type(x).__qualname__ + " to the program")

    def request(op, name, args=(), kwargs=None, handle=None):
        reply = ask({
            "op": op, "name": name, "handle": handle,
            "args": enc(list(args), out), "kwargs": enc(dict(kwargs or {}), out),
        })
        if "value" in reply:
            return dec(reply["value"], Remote)
        kind = getattr(__import__("builtins"), reply["raised"], None)
        kind = kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError
        raise kind("the program raised " + reply["raised"] + ": " + reply["detail"][-200:])

    def stub(name):
        def call(*args, **kwargs):
            return request("call", name, args, kwargs)
        call.__name__ = name
        return call

    try:
        hello = ask(payload["program"])
    except BaseException:
        emit("setup", tail())
        os._exit(0)
    if "error" in hello:
        emit("setup", hello["error"])
        os._exit(0)
    env = {"__name__": "tests", "__builtins__": __builtins__}
    env.update({name: stub(name) for name in hello["names"]})
    try:
        if payload["setup"]:
            exec(compile(payload["setup"], "setup.py", "exec"), env)
    except BaseException:
        emit("setup", tail())
        os._exit(0)
    for i, test in enumerate(payload["tests"]):
        emit("start", i)
        try:
            exec(compile(test, "test_%d.py" % i, "exec"), env)
        except AssertionError:
            emit("case", i, "failed", tail())
        except BaseException:
            emit("case", i, "crashed", tail())
        else:
            emit("case", i, "passed", "")
    emit("done")
    os._exit(0)

judge()
"""


def parse_harness_report(run: RunResult, nonce: str, n_tests: int) -> CheckReport:
    """Per-case results from the harness's nonce-tagged lines; unreported cases take the run's fate."""
    status: dict[int, CaseResult] = {}
    started: int | None = None
    for line in run.stdout.splitlines():
        head, _, body = line.partition(" ")
        if head != nonce:
            continue
        try:
            parts = json.loads(body)
        except ValueError:
            continue
        if parts[0] == "setup":
            crash = CaseResult("crashed", "program or setup raised: " + _tail(str(parts[1])))
            return CheckReport((crash,) * n_tests)
        if parts[0] == "start":
            started = int(parts[1])
        elif parts[0] == "case" and parts[2] in ("passed", "failed", "crashed"):
            status[int(parts[1])] = CaseResult(parts[2], _tail(str(parts[3])))
    if run.status == "timeout":
        fate = CaseResult("timed_out", f"over the time limit after {run.wall_s:.1f} s")
    else:
        ended = f"the run ended without reporting ({run.status}, exit {run.returncode})"
        fate = CaseResult("crashed", f"{ended}: {_tail(run.stderr_tail)}")
    if started is None:  # died or hung before the first case: in the program or setup code
        return CheckReport((fate,) * n_tests)
    skipped = CaseResult("skipped", "not run: the run ended before this case")
    results = [status.get(i, fate if i == started else skipped) for i in range(n_tests)]
    return CheckReport(tuple(results))


def check_asserts(
    program: str, tests: Sequence[str], setup: str = "", limits: Limits | None = None
) -> CheckReport:
    """Run ``program``, then ``setup``, then each test snippet (assert statements) in one sandbox.

    ``limits.wall_s`` bounds the whole run; a hanging case is ``timed_out`` and later ones skipped.
    """
    nonce = secrets.token_hex(16)
    payload = json.dumps({"program": program, "setup": setup, "tests": list(tests), "nonce": nonce})
    run = run_python(_HARNESS, payload, limits or Limits())
    return parse_harness_report(run, nonce, len(tests))
