"""Count type annotations and those that mention ``Any`` (arguments, returns, annotated assignments).

Usage: ``python scripts/count_any.py [PACKAGE_DIR]`` (default ``agon_env``): the share of
annotations that mention ``Any``, overall and per subpackage (issue #51's figure).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path


def annotations(tree: ast.AST) -> list[ast.expr]:
    """Every annotation in ``tree``: each argument's, each return's, each ``x: T`` assignment's."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.annotation is not None:
                    found.append(arg.annotation)
            if node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def main(root: Path) -> None:
    total: Counter[str] = Counter()
    anys: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        package = parts[0] if len(parts) > 1 else "(top)"
        for annotation in annotations(ast.parse(path.read_text())):
            total[package] += 1
            anys[package] += bool(re.search(r"\bAny\b", ast.unparse(annotation)))
    t, a = sum(total.values()), sum(anys.values())
    print(f"all: {a}/{t} = {100 * a / t:.1f} %")
    for package in sorted(total):
        print(f"  {package}: {anys[package]}/{total[package]} = {100 * anys[package] / total[package]:.1f} %")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "agon_env"))
