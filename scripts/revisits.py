"""Follow a run folder through the code: how often the path returns to a module it had left.

``python scripts/revisits.py cascade RUN`` loads ``RUN`` with ``Cascade.from_run`` (HF engine, CPU);
``python scripts/revisits.py eval RUN`` runs ``agon eval RUN`` on 2 test and 2 validation problems
(``--out`` a temporary folder). Either way every call into the package is watched (``sys.setprofile``), and
those that are handed the run folder (an argument equal to ``RUN``, as a path or a string, or a
``RunFolder`` of it) are *following* it. The modules of those calls, in order, with repeats in a
row merged, are the path; a *revisit* is each time the path enters a module it had already left.
It prints the path's visits per module and the revisits (issue 60: 17 through ``Cascade.from_run``
and 31 through ``agon eval`` on 86f3fbc).
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType

PACKAGE = "agon_env"


def _carries(value: object, run: Path) -> bool:
    if isinstance(value, (str, Path)):
        try:
            return Path(value).resolve() == run
        except (OSError, ValueError):
            return False
    path = getattr(value, "path", None)  # a RunFolder
    return isinstance(path, Path) and path.resolve() == run


def follow(run: Path, call: object) -> list[str]:
    """The modules, in order, of the package's calls handed ``run`` while ``call()`` runs."""
    run = run.resolve()
    path: list[str] = []

    def watch(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        handed = any(_carries(frame.f_locals.get(n), run) for n in names)
        if handed and (not path or path[-1] != module):
            path.append(module)

    sys.setprofile(watch)
    try:
        call()  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    return path


def revisits(path: list[str]) -> int:
    """Entries into a module the path had already left."""
    seen: set[str] = set()
    count = 0
    for module in path:
        count += module in seen
        seen.add(module)
    return count


def main(argv: list[str]) -> int:
    what, run = argv[0], Path(argv[1])
    if what == "cascade":
        from agon_env.serving.cascade import Cascade

        def call() -> object:
            return Cascade.from_run(run, engine="hf", device="cpu", direction="agent_a>agent_b")
    elif what == "eval":
        from agon_env.cli import main as agon

        out = tempfile.mkdtemp(prefix="revisits_")

        def call() -> object:
            argv = ["eval", str(run), "--problems", "2", "--val-problems", "2", "--device", "cpu"]
            return agon([*argv, "--out", out])
    else:
        raise SystemExit("usage: scripts/revisits.py cascade|eval RUN")
    path = follow(run, call)
    for module, n in Counter(path).most_common():
        print(f"  {n:3d}  {module}")
    modules = len(set(path))
    print(f"{what}: {len(path)} visits to {modules} modules, {revisits(path)} returns to a module it left")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
