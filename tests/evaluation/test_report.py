import json
import random

import pytest
from eval_fakes import FakeAgent, hashed

from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.methods import Policies
from agon_env.evaluation.report import (
    CHOSEN_CASCADE,
    across_runs,
    method_label,
    render_markdown,
)
from agon_env.evaluation.report_file import write_eval_report
from agon_env.evaluation.splits import load_eval_data


@pytest.fixture(scope="module")
def report():
    data = load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=12, val_problems=6)
    rng = random.Random(0)

    def noisy(p):
        return rng.random() < 0.6

    runs = []
    for i in range(2):
        pol = Policies(
            f"runs/agon-seed{i}",
            FakeAgent("base", hashed("base", 3)),
            {"agent_a": FakeAgent("a", noisy), "agent_b": FakeAgent("b", hashed(f"b{i}", 2), fixes=True)},
            algo="agon",
        )
        runs.append(Evaluator(data, seeds=[0, 1]).evaluate(pol))
    return {
        "data": data.describe(),
        "seeds": [0, 1],
        "confidence": 0.95,
        "sampling": {"temperature": 0.7},
        "runs": runs,
        "across_runs": across_runs(runs),
        "seconds": 1.0,
    }


def test_across_runs_pools_counts_and_skips_the_base(report):
    across = report["across_runs"]["agon"]
    assert "base-few-shot" not in across and "moa" not in across
    chosen = [r["methods"][r["selection"]["chosen"]]["pass@1"]["rate"] for r in report["runs"]]
    assert across[CHOSEN_CASCADE]["pass@1_across_runs"]["values"] == tuple(chosen)
    a = across["standalone:agent_a"]
    rates = [r["methods"]["standalone:agent_a"]["pass@1"] for r in report["runs"]]
    assert a["pass@1_pooled"]["trials"] == sum(r["trials"] for r in rates) == 48
    assert a["pass@1_across_runs"]["mean"] == pytest.approx(sum(r["rate"] for r in rates) / 2)
    assert across_runs(report["runs"][:1]) == {}
    low, high = a["pass@1_t_interval"]["low"], a["pass@1_t_interval"]["high"]
    assert low <= a["pass@1_across_runs"]["mean"] <= high


def test_across_runs_never_pools_two_algorithms(report):
    coop = dict(report["runs"][1], algo="coop")
    assert across_runs([report["runs"][0], coop]) == {}  # one run each: nothing to average
    assert set(across_runs([*report["runs"], coop, coop])) == {"agon", "coop"}


def test_markdown_has_table_one_pass_at_k_and_across_runs(report):
    md = render_markdown(report)
    assert md.count("| Method | pass@1 (%) mean ± std over seeds | 95% CI (%) |") == 2
    assert "### pass@k over seeds" in md and "pass@2 (%)" in md
    assert "## Across runs (per algorithm)" in md and "| agon | Standalone agent_a |" in md
    assert "### Blind-spot complementarity (test)" in md
    # Every table row has as many cells as its header (no stray '|' inside a cell).
    for block in md.split("\n\n"):
        rows = [ln for ln in block.splitlines() if ln.startswith("|")]
        if rows:
            assert len({ln.count("|") for ln in rows}) == 1, block


def test_written_json_is_strict_and_rerenders(report, tmp_path):
    bad = {**report, "seconds": float("nan")}
    jpath, mpath = write_eval_report(bad, tmp_path)
    loaded = json.loads(jpath.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert loaded["seconds"] is None and loaded["version"] == 1
    assert render_markdown(loaded) == mpath.read_text()


def test_labels():
    assert (
        method_label("cascade:agent_a>agent_b", {"selected": True})
        == "Cascade agent_a → agent_b (chosen on validation)"
    )
    assert method_label("self-cascade:agent_b") == "Self-cascade agent_b → agent_b"
    assert method_label("base-few-shot") == "Base, few-shot (worked examples)"
    assert method_label("base-zero-shot") == "Base, zero-shot (no worked examples)"


def test_a_report_written_before_the_rename_reads_its_base_row_as_few_shot(report):
    """Up to 35d8054 the few-shot base was stored as ``zero-shot``; it must still render and pool."""
    old = json.loads(json.dumps(report["runs"]))
    for run in old:
        m = run["methods"].pop("base-few-shot")
        run["methods"]["zero-shot"] = {**m, "family": "zero-shot"}
    assert across_runs(old) == report["across_runs"]  # the base row still left out
    assert "Base, few-shot (worked examples)" in render_markdown({**report, "runs": old})


def test_scoring_errors_and_verifier_timeouts_are_shown_apart(report):
    import copy

    rep = copy.deepcopy(report)
    m = next(iter(rep["runs"][0]["methods"].values()))
    assert m["score_errors"] == 0 and m["score_timeouts"] == 0  # the evaluation counts both
    md = render_markdown(rep)
    assert "gave no verdict" not in md and "timed out on" not in md
    m["score_errors"], m["score_timeouts"] = 2, 3
    md = render_markdown(rep)
    assert "score() gave no verdict on 2 answers" in md and "verifier timed out on 3 answers" in md


def test_writers_of_one_file_at_once_each_leave_a_whole_file(tmp_path) -> None:
    # Two `agon study run` on one folder write its files at once: each writer's temporary is its
    # own, so neither replaces the other's half-written one (a shared name made os.replace fail).
    import threading

    from agon_env.evaluation.report import write_text_atomic

    path = tmp_path / "spec.json"
    texts = [str(i) * 20_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(text: str) -> None:
        try:
            for _ in range(50):
                write_text_atomic(path, text)
        except BaseException as exc:  # any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and path.read_text() in texts
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_device_is_written_never_replaced(tmp_path):
    import os
    import stat

    from agon_env.evaluation.report import write_text_atomic

    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers
    except OSError as exc:
        pytest.skip(f"cannot make a device here: {exc}")
    # Renaming a file over it would replace the device with a regular file (as root, /dev/full).
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(full, "{}\n")
    assert stat.S_ISCHR(full.stat().st_mode)
