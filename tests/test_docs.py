"""Every docs code block marked runnable runs, so the docs cannot rot.

A block is marked by the HTML comment ``<!-- docs-test -->`` on the line before its
```` ```python ```` fence (invisible when rendered). The marked blocks of one file run in
order in one fresh interpreter, in an empty folder, as a reader pasting them would run
them: a later block may use what an earlier one defined. Blocks that need a GPU, the
network or minutes of CPU stay unmarked and say so in their text.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- docs-test -->"
_BLOCK = re.compile(r"^" + re.escape(MARK) + r"\n```python\n(.*?)^```", re.S | re.M)
_DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])


def runnable_blocks(text: str) -> list[str]:
    """The marked ```python blocks of a markdown text, in order."""
    return [m.group(1) for m in _BLOCK.finditer(text)]


def test_the_marker_finds_exactly_the_marked_blocks() -> None:
    text = f"a\n{MARK}\n```python\nx = 1\n```\n\n```python\nnot run\n```\n{MARK}\n```python\nprint(x)\n```\n"
    assert runnable_blocks(text) == ["x = 1\n", "print(x)\n"]


def test_the_docs_mark_their_examples() -> None:
    marked = {p.name: len(runnable_blocks(p.read_text())) for p in _DOCS}
    # The user-facing examples: registering a task (math and code), conformance, the solo view.
    assert marked["envs.md"] >= 4, marked


@pytest.mark.parametrize("doc", [p for p in _DOCS if runnable_blocks(p.read_text())], ids=lambda p: p.name)
def test_marked_blocks_run(doc: Path, tmp_path: Path) -> None:
    code = "\n\n".join(runnable_blocks(doc.read_text()))
    script = tmp_path / f"{doc.stem}_blocks.py"
    script.write_text(code)
    r = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"{doc.name}'s marked blocks failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"


@pytest.mark.parametrize(("cls", "env_id"), [("Primes", "me/primes-v0"), ("Adders", "me/adders-v0")])
def test_the_example_tasks_train(cls: str, env_id: str, tmp_path: Path) -> None:
    """docs/envs.md's example tasks, saved as a module, train with ``agon train --imports``."""
    (block,) = [b for b in runnable_blocks((ROOT / "docs" / "envs.md").read_text()) if f"class {cls}" in b]
    (tmp_path / "example_task.py").write_text(block)
    tiny = ["--model", "tiny", "--steps", "1", "--batch-problems", "1", "--grpo.num-generations", "2"]
    tiny += ["--sampling.max-new-tokens", "8", "--heldout-problems", "0", "--no-progress", "--threads", "1"]
    r = subprocess.run(
        [sys.executable, "-m", "agon_env.cli", "train", "--imports", "example_task", "--env", env_id, *tiny],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, f"{cls} does not train as shown:\n{r.stderr[-3000:]}"
    assert (tmp_path / "runs" / "agon-seed0" / "metrics.jsonl").is_file()
