"""The package's import graph, read from the code with ``ast``: modules, layers and cycles.

``python scripts/import_graph.py`` prints the layer graph that docs/architecture.md draws
(one line per layer: what it imports), then any cycle. ``tests/test_structure.py`` uses the
same walk, so the picture and the test cannot disagree.

Every ``import`` counts: at module level, inside a function (a lazy import is still an
edge) and under ``if TYPE_CHECKING:``. ``from pkg import name`` is an edge to ``pkg.name``
when that is a module, else to ``pkg`` (its ``__init__``). Importing ``a.b.c`` also runs
``a/__init__`` and ``a/b/__init__``, but those are not counted as edges: a package's
``__init__`` may import its own modules without that being a cycle.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "agon_env"


@dataclass(frozen=True)
class Edge:
    source: str
    """The importing module (dotted name; a package's ``__init__`` is the package's name)."""
    target: str
    """The imported module of this package."""
    line: int
    """Line of the import statement in ``source``."""
    lazy: bool
    """True when the import sits inside a function (it runs when the function is called)."""
    names: tuple[str, ...] = ()
    """What ``from target import ...`` takes (empty for ``import target`` and for a submodule)."""


def modules(root: Path = REPO) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _absolute(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _imports(tree: ast.AST) -> Iterable[tuple[ast.stmt, bool]]:
    """Every import statement and whether it sits inside a function."""

    def walk(node: ast.AST, lazy: bool) -> Iterable[tuple[ast.stmt, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from walk(child, inner)

    yield from walk(tree, False)


def edges(root: Path = REPO) -> list[Edge]:
    """Every import of one module of the package by another."""
    known = modules(root)
    out = []
    for source, path in known.items():
        is_package = path.name == "__init__.py"
        for node, lazy in _imports(ast.parse(path.read_text(), str(path))):
            taken: dict[str, list[str]] = {}
            if isinstance(node, ast.Import):
                for alias in node.names:
                    taken.setdefault(alias.name, [])
            else:
                module = _absolute(source, is_package, node)
                for alias in node.names:
                    if f"{module}.{alias.name}" in known:
                        taken.setdefault(f"{module}.{alias.name}", [])
                    else:
                        taken.setdefault(module, []).append(alias.name)
            for target, names in taken.items():
                if target in known and target != source:
                    out.append(Edge(source, target, node.lineno, lazy, tuple(names)))
    return out


def layer(module: str) -> str:
    """A module's layer: its subpackage of ``agon_env`` (``agon_env.envs.tasks.code`` ->
    ``agon_env.envs``), or the module itself when it sits at the top (``agon_env.config``)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_edges(all_edges: Iterable[Edge]) -> dict[tuple[str, str], list[Edge]]:
    """Imports between two layers, by (importing layer, imported layer)."""
    out: dict[tuple[str, str], list[Edge]] = {}
    for e in all_edges:
        pair = (layer(e.source), layer(e.target))
        if pair[0] != pair[1]:
            out.setdefault(pair, []).append(e)
    return out


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components (Tarjan), each sorted: a node alone, or a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if v not in index:
            visit(v)
    return sorted(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The components with more than one node: sets of nodes that import each other."""
    return [c for c in components(graph) if len(c) > 1]


def module_graph(all_edges: Iterable[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        graph.setdefault(e.source, set()).add(e.target)
    return graph


def layer_graph(all_edges: Iterable[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for source, target in layer_edges(all_edges):
        graph.setdefault(source, set()).add(target)
    return graph


WINGS = ("agon_env.algorithms", "agon_env.evaluation")
"""The two top layers: training and evaluation. Neither imports the other but for :data:`UPWARD_CALL`."""
UPWARD_CALL = ("agon_env.algorithms.run", "agon_env.evaluation.heldout", ("TrainedRunCheck",))
"""The one import between the wings: ``agon train``'s last step runs the held-out check."""


def _short(name: str) -> str:
    return name.removeprefix(f"{PACKAGE}.") if name != PACKAGE else f"{PACKAGE} (__init__)"


def levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each layer one above the highest layer it imports (0: imports none); the layers of a
    cycle share one level."""
    of = {n: tuple(c) for c in components(graph) for n in c}
    depth: dict[tuple[str, ...], int] = {}

    def level(component: tuple[str, ...]) -> int:
        if component not in depth:
            below = {of[t] for n in component for t in graph.get(n, ())} - {component}
            depth[component] = 1 + max((level(c) for c in sorted(below)), default=-1)
        return depth[component]

    return {n: level(c) for n, c in of.items()}


def render(all_edges: list[Edge]) -> str:
    """The layer picture: highest layer first, each with the layers it imports (all below
    it when there is no cycle), then every import between the two wings."""
    graph = layer_graph(all_edges)
    depth = levels(graph)
    width = max(len(_short(n)) for n in depth)
    lines = ["level  layer" + " " * (width - 3) + "imports"]
    for name in sorted(depth, key=lambda n: (-depth[n], n)):
        below = ", ".join(sorted(_short(t) for t in graph.get(name, ()))) or "-"
        lines.append(f"{depth[name]:>5}  {_short(name):<{width}}  ─▶ {below}")
    lines.append("")
    lines.append("between the wings (algorithms, evaluation):")
    for source, target in (WINGS, WINGS[::-1]):
        for e in layer_edges(all_edges).get((source, target), []):
            what = f": {', '.join(e.names)}" if e.names else ""
            lazy = " (inside a function)" if e.lazy else ""
            lines.append(f"  {_short(e.source)} ─▶ {_short(e.target)}{what}{lazy}")
    return "\n".join(lines)


def main() -> int:
    all_edges = edges()
    print(render(all_edges))
    problems = [("modules", c) for c in cycles(module_graph(all_edges))]
    problems += [("layers", c) for c in cycles(layer_graph(all_edges))]
    for kind, component in problems:
        print(f"cycle between {kind}: {' <-> '.join(_short(m) for m in component)}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
