"""Child process for :mod:`agon_env.envs.tasks.verify`: JSON lines in, JSON lines out.

It runs in its own process so that a pathological answer (``10^{10^{10^{10}}}``) can be
killed from any thread of the parent; math-verify's own ``signal.alarm`` timeout only
works in a main thread, which the parent may not be.
"""

from __future__ import annotations

import json
import sys
import traceback


def _parse(text: str) -> list:
    from math_verify import parse

    # Bare LaTeX (``\frac12``) often parses only inside math delimiters, plain text
    # (``72.0``) parses either way: try the delimited form first.
    for candidate in (f"${text}$", text):
        out = parse(candidate, parsing_timeout=None)
        if out:
            return out
    return []


def check(gold: str, pred: str) -> bool:
    from math_verify import verify

    g, p = _parse(gold), _parse(pred)
    if not g or not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


def main() -> None:
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply: dict[str, object] = {"ok": check(req["gold"], req["pred"])}
        except Exception:  # no verdict, not a wrong answer: the parent raises it and keeps this worker
            reply = {"error": traceback.format_exc()}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
