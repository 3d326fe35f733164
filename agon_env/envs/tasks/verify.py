"""Math answer checking: cheap normalisation first, then ``math-verify`` with a hard timeout.

``answers_match(gold, pred)`` is the one entry point. It returns within about ``timeout``
seconds from any thread, and raises :class:`~agon_env.envs.tasks.errors.VerifierTimeout` or
:class:`~agon_env.envs.tasks.errors.VerifierError` (never a plain False) when math-verify
overran or could not judge, so a broken verifier is counted, not trained on as wrong answers:

1. Normalise both sides: unwrap ``\\boxed{…}``, strip ``$`` and trailing periods, drop
   thousands separators (``1,000`` → ``1000`` but not ``1,-2``), lower-case words.
2. ``yes``/``no``/``true``/``false`` gold answers compare as strings (the paper drops them
   from DeepMath, but GSM-style tasks and user tasks may still have them).
3. Plain numbers compare exactly as fractions (``0.5`` = ``1/2`` = ``\\frac{1}{2}`` goes to 4).
4. Everything else goes to math-verify (gold first) in a persistent child process that
   is killed and restarted when it overruns ``timeout`` -- the only timeout that works
   outside the main thread and survives sympy hanging in C code. An exception inside the
   child comes back as its traceback; a child that dies is reported with its stderr.
"""

from __future__ import annotations

import atexit
import json
import re
import subprocess
import sys
import tempfile
import threading
from fractions import Fraction
from typing import IO

from agon_env.envs.tasks.errors import VerifierError, VerifierTimeout

BINARY = frozenset({"yes", "no", "true", "false"})
MAX_ANSWER_CHARS = 4000
"""Longer "answers" are not final answers; refusing them bounds the verifier's work."""
_STDERR_TAIL = 4000

_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:/\d+)?")


def unbox(text: str) -> str:
    """Content of the last ``\\boxed{…}`` (brace-matched), or ``text`` unchanged."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return text
    depth, i = 0, start + len("\\boxed{") - 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return text


def normalize(text: str) -> str:
    text = unbox(text.strip())
    previous = None
    while previous != text:  # "$1,000$." and "1,000.$" both reduce to the bare number
        previous, text = text, text.strip().strip("$").rstrip(".")
    text = re.sub(r"^\\text\{(.*)\}$", r"\1", text)
    text = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), text)
    if text.lower() in BINARY:
        return text.lower()
    return text


def _as_fraction(text: str) -> Fraction | None:
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


class _Worker:
    """One math-verify child process shared by all threads, restarted after a timeout or crash.

    Its stderr goes to a file, not a pipe (a full pipe would block the child) and not to
    /dev/null: when the child dies, the error carries what it said.
    """

    def __init__(self, module: str = "agon_env.envs.tasks._verify_worker") -> None:
        self.module = module
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None
        atexit.register(self.close)

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            # Kept open for the child's lifetime (closed in close()), so no context manager.
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", self.module],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._stderr,
                    text=True,
                    bufsize=1,
                )
            except OSError as e:
                raise VerifierError(f"cannot start the math-verify worker: {e}") from e
        return self._proc

    def _died(self, what: str) -> VerifierError:
        """The error for a child that stopped answering, with its stderr's tail; the next call restarts it."""
        said = ""
        if self._stderr is not None and self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._stderr.seek(0)
            said = self._stderr.read()[-_STDERR_TAIL:]
        self.close()
        return VerifierError(f"math-verify worker {what}; its stderr:\n{said or '(empty)'}")

    def check(self, gold: str, pred: str, timeout: float) -> bool:
        """math-verify's verdict; :class:`VerifierError` / :class:`VerifierTimeout` when there is none."""
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps({"gold": gold, "pred": pred}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                raise self._died(f"exited before the request ({e})") from e
            reply: list[str] = []
            reader = threading.Thread(target=lambda: reply.append(proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if not reply:
                self.close()  # overran: the child may be stuck in sympy; kill it, start afresh next call
                raise VerifierTimeout(f"math-verify gave no verdict within {timeout:g} s on {pred[:200]!r}")
            if not reply[0]:
                raise self._died(f"exited (status {proc.wait()}) without answering")
            try:
                out = json.loads(reply[0])
            except ValueError as e:
                raise self._died(f"wrote a malformed reply {reply[0][:200]!r}") from e
            if "error" in out:  # the child caught it and lives on: nothing to restart
                raise VerifierError(
                    f"math-verify raised on gold {gold[:200]!r}, pred {pred[:200]!r}:\n{out['error']}"
                )
            return bool(out["ok"])

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


_WORKER = _Worker()


def answers_match(gold: str, pred: str | None, timeout: float = 5.0) -> bool:
    """True when ``pred`` is mathematically equal to ``gold``; bounded by ``timeout`` seconds.

    Raises :class:`~agon_env.envs.tasks.errors.VerifierTimeout` when math-verify overran
    ``timeout`` and :class:`~agon_env.envs.tasks.errors.VerifierError` when it could not judge:
    neither is a wrong answer. A caller that wants a bool whatever happens catches
    ``VerifierError`` (it catches both) and decides what a missing verdict means.
    """
    if pred is None:
        return False
    gold, pred = str(gold), str(pred)
    if len(pred) > MAX_ANSWER_CHARS:
        return False
    g, p = normalize(gold), normalize(pred)
    if not p:
        return False
    if g == p:
        return True
    if g in BINARY or p in BINARY:
        return False
    fg, fp = _as_fraction(g), _as_fraction(p)
    if fg is not None and fp is not None:
        return fg == fp
    return _WORKER.check(g, p, timeout)


_TOKEN_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?(?![\w])")


def _answer_spans(text: str, answer: str) -> list[tuple[int, int]]:
    """Where ``text`` states ``answer``: its normalised string, or a number equal to it."""
    a = normalize(answer)
    if not a:
        return []
    target = _as_fraction(a)
    if target is not None:
        spans = []
        for m in _TOKEN_NUMBER.finditer(text):
            f = _as_fraction(m.group(0).replace(",", ""))
            if f is not None and f == target:
                spans.append(m.span())
        return spans
    spans, start = [], text.lower().find(a.lower())
    while start >= 0:
        spans.append((start, start + len(a)))
        start = text.lower().find(a.lower(), start + len(a))
    return spans


def mentions_answer(text: str, answer: str | None) -> bool:
    """Whether ``text`` states ``answer`` (numbers compared by value, else as a normalised string).

    Cheap on purpose (no math-verify call): it runs on every challenger turn to measure how
    often the summary shown to the rival still gives the draft's result away.
    """
    return bool(answer) and bool(_answer_spans(text, str(answer)))


REDACTED = "[withheld]"


def redact_answer(text: str, answer: str | None) -> str:
    """``text`` with every statement of ``answer`` (as :func:`mentions_answer` finds them) replaced."""
    if not answer:
        return text
    for lo, hi in reversed(_answer_spans(text, str(answer))):
        text = text[:lo] + REDACTED + text[hi:]
    return text
