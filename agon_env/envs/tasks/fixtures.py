"""Synthetic files in the hub datasets' formats, for runs that cannot reach the hub.

The offline paper-path test and ``scripts/gpu_check.sh`` point the paper preset's
``agon/deepmath-v0`` at :func:`write_deepmath_fixture`'s file (``env.kwargs.path``), so
they run the preset's exact loader, filters and content-disjoint splits. The problems are
not DeepMath's: they only share its columns. :func:`write_mbpp_fixture` does the same for
``agon/mbpp-v0``, so code-env training tests run offline on MBPP's loader and splits.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

FIXTURE_DROPPED = ("Is 91 prime?", "Compute 2 + 2.")
"""Questions of the rows the paper's filters drop (a yes/no answer; difficulty below 8)."""


def write_deepmath_fixture(path: str | Path, n: int = 60, seed: int = 0) -> Path:
    """A parquet file with DeepMath-103K's columns (``question``, ``final_answer``,
    ``difficulty``): ``n`` problems of difficulty 8-9 plus the two rows of
    :data:`FIXTURE_DROPPED`, so a reader can see the preset's filters applied."""
    import pandas as pd

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        q = f"Let f(x) = {a}x + {b}. Compute f({i})."
        rows.append({"question": q, "final_answer": str(a * i + b), "difficulty": 8.0 + (i % 3) / 2})
    binary, easy = FIXTURE_DROPPED
    rows += [
        {"question": binary, "final_answer": "No", "difficulty": 9.0},
        {"question": easy, "final_answer": "4", "difficulty": 2.0},
    ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


MBPP_FIXTURE_IDS = {"test": (11, 12), "validation": (511,), "train": (601, 602, 603, 604)}
"""Task ids of :func:`write_mbpp_fixture`'s rows, per MBPP split."""


def write_mbpp_fixture(path: str | Path) -> Path:
    """A JSONL file in ``mbpp.jsonl``'s format: one tiny function-writing problem per id of
    :data:`MBPP_FIXTURE_IDS`, each with its reference code and two asserts."""
    rows = [
        {
            "task_id": i,
            "text": f"Write a function that adds {i} to a number.",
            "code": f"def add_{i}(x):\n    return x + {i}",
            "test_list": [f"assert add_{i}(1) == {1 + i}", f"assert add_{i}(-{i}) == 0"],
            "test_setup_code": "",
            "challenge_test_list": [],
        }
        for ids in MBPP_FIXTURE_IDS.values()
        for i in ids
    ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
