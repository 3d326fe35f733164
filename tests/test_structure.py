"""The package's shape, read from its imports with ``ast`` (``scripts/import_graph.py``).

Every import counts, lazy ones inside functions and ``TYPE_CHECKING`` ones included: no
two modules and no two layers import each other, evaluation imports nothing of training,
training reaches evaluation through one named call, the floor imports nothing above it, and
no command module imports the command table that names it. docs/architecture.md's picture is
the script's output.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from agon_env import cli

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
graph = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["import_graph"] = graph
_spec.loader.exec_module(graph)  # type: ignore[union-attr]

EDGES = graph.edges(ROOT)
FLOOR = ("config", "options", "resolved", "upgrade", "run_folder", "errors", "stats", "metric_names")
FLOOR = tuple(f"agon_env.{m}" for m in FLOOR)
LEAVES = ("agon_env.vocabulary", "agon_env.blocks", "agon_env.json_value")
"""Modules that import nothing of the package: the floor may use them."""


def test_the_walk_sees_lazy_imports_and_reports_a_cycle():
    run, heldout = "agon_env.algorithms.run", "agon_env.evaluation.heldout"
    lazy = [e for e in EDGES if e.source == run and e.target == heldout]
    assert lazy and all(e.lazy for e in lazy)
    assert any(e.source == "agon_env.algorithms.trainer" and e.target == "agon_env.config" for e in EDGES)
    assert graph.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert graph.cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other():
    assert graph.cycles(graph.module_graph(EDGES)) == []


def test_no_two_layers_import_each_other():
    found = graph.cycles(graph.layer_graph(EDGES))
    assert found == []


def test_evaluation_imports_nothing_of_training():
    up = graph.layer_edges(EDGES).get(("agon_env.evaluation", "agon_env.algorithms"), [])
    assert up == [], [f"{e.source}:{e.line} imports {e.target}" for e in up]


def test_training_reaches_evaluation_through_one_named_call():
    down = graph.layer_edges(EDGES).get(("agon_env.algorithms", "agon_env.evaluation"), [])
    assert [(e.source, e.target, e.names) for e in down] == [graph.UPWARD_CALL]


@pytest.mark.parametrize("module", FLOOR)
def test_the_floor_imports_neither_wing(module):
    wings = [e for e in EDGES if e.source == module and e.target.startswith(graph.WINGS)]
    assert wings == []


@pytest.mark.parametrize("module", FLOOR)
def test_the_floor_imports_nothing_above_it(module):
    """config, the resolved run and the run folder compose envs', agents' and training's options
    without importing those layers: the floor is the bottom."""
    up = [
        f"{e.target} (line {e.line})" for e in EDGES if e.source == module and e.target not in FLOOR + LEAVES
    ]
    assert up == []


@pytest.mark.parametrize("module", LEAVES)
def test_the_leaves_import_nothing_of_the_package(module):
    assert [e.target for e in EDGES if e.source == module] == []


def test_errors_import_nothing_of_the_package():
    assert [e.target for e in EDGES if e.source == "agon_env.errors"] == []


def test_the_floor_loads_without_torch():
    code = f"import sys; import {', '.join(FLOOR)}; assert 'torch' not in sys.modules, 'torch loaded'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


COMMAND_MODULES = sorted({target.partition(":")[0] for target, _ in cli.COMMANDS.values()})


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_no_command_module_imports_the_table_that_names_it(module):
    # agon_env.cli names its commands as strings, so the graph sees no edge from it to them:
    # an import back would be a cycle no other test here can find.
    back = [e.line for e in EDGES if e.source == module and e.target == "agon_env.cli"]
    assert back == [], f"{module} imports agon_env.cli (lines {back}): import agon_env.command instead"


def test_the_architecture_picture_is_the_code():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    marker = "<!-- python scripts/import_graph.py -->\n```\n"
    assert marker in doc, "docs/architecture.md lost its layer picture"
    drawn = doc.split(marker, 1)[1].split("\n```", 1)[0]
    assert drawn == graph.render(EDGES), "redraw it: python scripts/import_graph.py"
