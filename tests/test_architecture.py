"""docs/architecture.md's rules, held to the code: who parses files, who names an old layout, where
error classes live. The lists are read from the doc's tables, so the doc and this test cannot
disagree; the package is read with ``ast`` (every call and name, lazy ones included), nothing runs.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agon_env"
DOC = (ROOT / "docs" / "architecture.md").read_text()
PARSE_CALLS = {("json", "load"), ("json", "loads"), ("yaml", "safe_load"), ("torch", "load")}
UPGRADE = "agon_env/upgrade.py"


def doc_table(name: str) -> list[list[str]]:
    """The rows of the doc's table after ``<!-- architecture: NAME -->``, cells stripped of backticks."""
    marker = f"<!-- architecture: {name} -->\n"
    assert marker in DOC, f"docs/architecture.md lost its {name} table"
    block = DOC.split(marker, 1)[1].split("<!-- end -->", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in block.splitlines() if line.startswith("|")]
    return [[cell.strip().strip("`") for cell in row] for row in rows[2:]]  # past the header and rule


READERS = {row[0] for row in doc_table("parsers")}
SIGNALS = {(row[0], row[1]) for row in doc_table("signals")}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


TREES = dict(modules())


def parse_calls(tree: ast.AST) -> list[str]:
    """``json.loads`` and the like called in ``tree`` (``module.function(...)``, as the package
    writes them)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and (owner.id, node.func.attr) in PARSE_CALLS:
                found.append(f"{owner.id}.{node.func.attr} (line {node.lineno})")
    return found


def legacy_names(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else node.name
            if isinstance(node, ast.alias)
            else ""
        )
        if name.startswith("LEGACY_"):
            names.append(f"{name} (line {getattr(node, 'lineno', '?')})")
    return names


def exception_classes() -> dict[str, str]:
    """Every exception class the package defines -> its module (bases followed to a fixpoint)."""
    known = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
    known = {n for n in known if issubclass(getattr(builtins, n), BaseException)}
    classes = {
        (module, node.name): {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
        for module, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    found: dict[str, str] = {}
    while True:
        new = {
            name: m
            for (m, name), bases in classes.items()
            if name not in found and bases & (known | set(found))
        }
        if not new:
            return found
        found.update(new)


def layer(module: str) -> str:
    parts = module.split("/")
    return parts[1] if len(parts) > 2 else "agon_env"


def test_the_walks_see_what_they_look_for():
    tree = ast.parse("import json\ndef f(p):\n    return json.loads(p.read_text()), x.LEGACY_A\n")
    assert parse_calls(tree) == ["json.loads (line 3)"] and legacy_names(tree) == ["LEGACY_A (line 3)"]
    assert parse_calls(ast.parse("text = 'json.load(open(p))'")) == []  # a string is no call
    classes = exception_classes()
    assert classes["UserError"] == "agon_env/errors.py" and classes["ConfigError"] == "agon_env/errors.py"
    assert classes["Aborted"] == "agon_env/agents/aborting.py"  # RuntimeError, a builtin base
    assert "ResolvedRun" not in classes


def test_the_doc_lists_only_modules_that_exist():
    listed = READERS | {module for _, module in SIGNALS}
    assert sorted(m for m in listed if m not in TREES) == []


def test_only_the_reader_modules_parse_files():
    found = {m: parse_calls(t) for m, t in TREES.items() if m not in READERS}
    assert {m: calls for m, calls in found.items() if calls} == {}, (
        "parse in the module that writes the file, and list it in docs/architecture.md's parsers table"
    )


def test_only_upgrade_names_an_old_layout():
    found = {m: legacy_names(t) for m, t in TREES.items() if m != UPGRADE}
    assert {m: names for m, names in found.items() if names} == {}, "read old layouts in upgrade.py alone"


def test_error_classes_are_defined_in_their_layers_errors_module():
    stray = {
        name: module
        for name, module in exception_classes().items()
        if not module.endswith("/errors.py") and (name, module) not in SIGNALS
    }
    assert stray == {}, "define it in the layer's errors.py, or list it as a signal in docs/architecture.md"


def test_each_layer_has_at_most_one_errors_module():
    by_layer: dict[str, list[str]] = {}
    for module in TREES:
        if module.endswith("/errors.py"):
            by_layer.setdefault(layer(module), []).append(module)
    assert {k: v for k, v in by_layer.items() if len(v) > 1} == {}


def test_a_signal_is_no_user_error():
    """A class listed as a signal must not be one a command shows the user (those go in errors.py)."""
    bases = {
        node.name: {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
        for tree in TREES.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    user = {"UserError"}
    while new := {name for name, of in bases.items() if name not in user and of & user}:
        user |= new
    assert sorted(name for name, _ in SIGNALS if name in user) == []


COMMAND_MODULE = re.compile(r"agon_env(\.\w+)?\.commands\.\w+")
"""``<layer>/commands/<command>.py`` (``agon_env/commands/`` for the package's own commands)."""


def test_every_command_module_is_named_one_way():
    from agon_env.cli import COMMANDS

    named = {target.partition(":")[0] for target, _ in COMMANDS.values()}
    assert sorted(m for m in named if not COMMAND_MODULE.fullmatch(m)) == []


def test_only_command_modules_run_a_command():
    """Whoever parses a command line under the contract is a command module, named as one."""
    callers = {
        module
        for module, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("run_command", "guarded")
    }
    assert sorted(m for m in callers if not COMMAND_MODULE.fullmatch(m[:-3].replace("/", "."))) == [
        "agon_env/command.py"
    ]
