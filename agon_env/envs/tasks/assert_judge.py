"""The assert-test judge: a standalone script run inside the sandbox (never imported to run).

Runs inside the sandbox as two processes. The trusted *judge* forks the *program* process
before it reads anything, so the program's memory never holds a test, an expected value or
the report nonce. The program process loads the answer and then only answers calls: the
judge runs every test itself with the program's functions replaced by stubs that send the
arguments down a pipe and take back the return value -- as plain data only (exact builtin
types, tagged so tuples, sets and dicts survive), so an object with a rigged ``__eq__``
cannot reach a comparison. The judge makes itself non-dumpable, so the program process
(same uid) can neither ptrace it nor open its file descriptors through /proc. Exiting
early, printing fake reports (the program's stdout is its stderr) or patching assert,
builtins or the test code therefore cannot pass a test: only correct return values can.

It reads ``{"program", "setup", "tests", "nonce"}`` as JSON on stdin and writes one
nonce-tagged JSON line per event (``setup``/``start``/``case``/``done``) on stdout, which
:func:`agon_env.envs.tasks.code_checks.parse_harness_report` reads.
"""

import contextlib
import ctypes
import json
import os
import signal
import sys
import traceback

SCALARS = {int: "i", float: "f", str: "s", bool: "b", type(None): "n"}
CONTAINERS = {list: "l", tuple: "t", set: "S", frozenset: "F"}


class NotPlain(Exception):
    pass


class ProgramDied(BaseException):
    # A BaseException, so no try/except Exception in a test can swallow it.
    def __init__(self, status, detail):
        super().__init__(detail)
        self.status, self.detail = status, detail


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
    with contextlib.suppress(Exception):  # PR_SET_DUMPABLE = 4: no ptrace, no /proc/<pid>/{mem,fd}
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    to_prog, from_judge = os.pipe()
    to_judge, from_prog = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(from_judge)
        os.close(to_judge)
        program_side(to_prog, from_prog)

    def died():
        # The program's process is gone: how it ended says whether it ran out of CPU time
        # (RLIMIT_CPU: SIGXCPU, then SIGKILL a second later) -- a time-out, not a crash.
        try:
            _, status = os.waitpid(child, 0)
        except ChildProcessError:
            return ProgramDied("crashed", "the program's process ended")
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return ProgramDied("timed_out", "the program ran out of CPU time")
        return ProgramDied("crashed", "the program's process ended")

    def finish():
        # Reap the program: its CPU time then counts in the run's (the sandbox reads it with
        # wait4, and the time-limit scaling measures references by it).
        with contextlib.suppress(Exception):
            os.kill(child, 9)
            os.waitpid(child, 0)
        os._exit(0)

    os.close(to_prog)
    os.close(from_prog)
    wr, rd = os.fdopen(from_judge, "w", buffering=1), os.fdopen(to_judge, "r")
    payload = json.loads(sys.stdin.read())  # only now: the program's memory never held the tests
    nonce = payload["nonce"]

    def emit(*parts):
        sys.stdout.write(nonce + " " + json.dumps(parts) + "\n")
        sys.stdout.flush()

    def ask(msg):
        try:
            wr.write(json.dumps(msg) + "\n")
            wr.flush()
            line = rd.readline()
        except OSError:
            line = ""
        if not line:
            raise died()
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
            return f"<program object #{self._h}>"

        def _refuse(self, *args):
            raise TypeError("a test compared or used a program object, not plain data")

        __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = _refuse
        __hash__ = None

    def out(x):
        if isinstance(x, Remote):
            return ["h", x._h]
        raise TypeError("cannot pass a " + type(x).__qualname__ + " to the program")

    def request(op, name, args=(), kwargs=None, handle=None):
        reply = ask(
            {
                "op": op,
                "name": name,
                "handle": handle,
                "args": enc(list(args), out),
                "kwargs": enc(dict(kwargs or {}), out),
            }
        )
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
    except ProgramDied as e:
        emit("setup", e.detail, e.status)
        finish()
    except BaseException:
        emit("setup", tail())
        finish()
    if "error" in hello:
        emit("setup", hello["error"])
        finish()
    env = {"__name__": "tests", "__builtins__": __builtins__}
    env.update({name: stub(name) for name in hello["names"]})
    try:
        if payload["setup"]:
            exec(compile(payload["setup"], "setup.py", "exec"), env)
    except BaseException:
        emit("setup", tail())
        finish()
    for i, test in enumerate(payload["tests"]):
        emit("start", i)
        try:
            exec(compile(test, f"test_{i}.py", "exec"), env)
        except ProgramDied as e:  # the later cases cannot run: they are reported as skipped
            emit("case", i, e.status, e.detail)
            break
        except AssertionError:
            emit("case", i, "failed", tail())
        except BaseException:
            emit("case", i, "crashed", tail())
        else:
            emit("case", i, "passed", "")
    emit("done")
    finish()


if __name__ == "__main__":
    judge()
