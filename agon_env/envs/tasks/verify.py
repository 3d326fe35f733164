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
_MINUS = str.maketrans(dict.fromkeys("\u2212\u2012\ufe63\uff0d", "-"))
"""Unicode minus signs read as ``-`` (one character each, so spans stay put). Not the en dash:
it is a range or a pause ("3–5", "the answer – 5") more often than a sign."""
_RESULT_CUE = re.compile(
    r"(?:[=≈→:]|->|=>|\\boxed\{"
    r"|\b(?:is|are|was|were|equals?|equal\s+to|gives?|gave|giving|gets?|got|getting|makes?|made|yields?"
    r"|leaves?|becomes?|became|so|thus|hence|therefore|answer|result|total)\b(?:\s+(?:a|an|the)\b)?)[\s($]*\Z",
    re.IGNORECASE,
)
"""What a stated result follows: a relation sign, or a verb/noun that introduces a value."""
_OPERAND_NEXT = re.compile(r"\s*[-+*/×÷^·]\s*[-+]?[\d(.]")
"""A number followed by an operator and another operand is a term of an expression, not a result."""
_TEXT_END = re.compile(r"[\s)$.!?]*")
_CLAUSE_BREAKS = ",;:.!?\n"


def _states_result(text: str, lo: int, hi: int) -> bool:
    before = text[:lo].rstrip(" \t($")
    if _TEXT_END.fullmatch(text, hi) and (not before or before[-1] in _CLAUSE_BREAKS):
        return True  # the closing clause is the number alone: "…, so 9." or just "-4."
    if _OPERAND_NEXT.match(text, hi):
        return False
    return _RESULT_CUE.search(text, max(0, lo - 40), lo) is not None


def _answer_spans(text: str, answer: str) -> list[tuple[int, int]]:
    """Where ``text`` states ``answer``.

    A numeric answer is stated where a *signed* number token equal to it by value (``0.5`` =
    ``1/2``, ``1,000`` = ``1000``; Unicode minus ``−`` reads as ``-``) stands as a result:

    * after a result cue -- ``=``, ``≈``, ``→``, ``->``, ``=>``, ``:``, ``\\boxed{`` or one of
      *is, are, was, equals, equal to, gives, gets/got, makes, yields, leaves, becomes, so, thus,
      hence, therefore, answer, result, total*, optionally followed by *a, an, the* (an opening
      ``(`` or ``$`` may come between) -- and not followed by an operator and another operand
      (``= 3 + 4``: 3 is a term);
    * or alone in the text's closing clause: last in the text (only ``.!?)$`` after it) and
      right after a clause break (``,;:.!?``, a newline) or at the very start (``"-4."``,
      ``"Added the tens, 70."``).

    So ``3 − 7 = −4`` states -4 (and not 4, nor 7); ``x = -4`` does not state 4; ``Subtracting 5
    from 10`` states neither 5 nor 10, being operands; ``7 - 4 = 3`` states neither 4 nor 7;
    ``= 3 + 4 = 7`` states 7, not 3. A number in running text without a cue ("the 5 apples",
    "a total of 97") is not counted. A non-numeric answer is found as its normalised string,
    case-insensitively, anywhere.
    """
    a = normalize(answer.translate(_MINUS))
    if not a:
        return []
    target, flat = _as_fraction(a), text.translate(_MINUS)
    if target is not None:
        spans = []
        for m in _TOKEN_NUMBER.finditer(flat):
            f = _as_fraction(m.group(0).replace(",", ""))
            if f is not None and f == target and _states_result(flat, *m.span()):
                spans.append(m.span())
        return spans
    spans, start = [], flat.lower().find(a.lower())
    while start >= 0:
        spans.append((start, start + len(a)))
        start = flat.lower().find(a.lower(), start + len(a))
    return spans


def mentions_answer(text: str, answer: str | None) -> bool:
    """Whether ``text`` states ``answer`` as a result (the rule and its examples: :func:`_answer_spans`).

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
