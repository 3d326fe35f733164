import json
import random

import pytest
from eval_fakes import FakeAgent, hashed

from agon_env import metric_names as M
from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.methods import Policies
from agon_env.evaluation.plots import NoMetricsError, load_run, plot_all
from agon_env.evaluation.report_file import write_eval_report
from agon_env.evaluation.splits import load_eval_data


def fake_run(folder, algo, steps=30, seed=0):
    """A metrics.jsonl shaped like the trainer's (keys as in agon_env/metric_names.py)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(f"algo: {algo}\n")
    with (folder / "metrics.jsonl").open("w") as f:
        for s in range(steps):
            p = 0.2 + 0.5 * s / steps
            row = {
                "step": s,
                "len_tokens/drafter": 40 - s * 0.5 + rng.random() * 5,
                "loss/agent_a": rng.random(),
            }
            for seat in ("agent_a",) if algo == "grpo" else ("agent_a", "agent_b"):
                for role in ("drafter", "challenger"):
                    if algo == "grpo" and role == "challenger":
                        continue
                    row[f"acc/{seat}/{role}"] = min(1.0, p + rng.random() * 0.2)
            if algo != "grpo":
                row |= {
                    "win_rate/agent_a": 0.2 + rng.random() * 0.1,
                    "win_rate/agent_b": 0.15 + rng.random() * 0.1,
                    "conversion_rate": 0.3 + s / steps * 0.3,
                    "len_tokens/challenger": 35 + rng.random() * 5,
                }
            f.write(json.dumps(row) + "\n")
        f.write('{"step": 99, "acc/ag')  # a torn line from a killed run is skipped
    return folder


def fake_eval(folder, seed):
    data = load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=30, val_problems=10)
    pol = Policies(
        folder.name,
        FakeAgent("base", hashed("base", 3), tokens=25),
        {
            "agent_a": FakeAgent("a", hashed(f"a{seed}", 2), tokens=30 + 5 * seed),
            "agent_b": FakeAgent("b", hashed(f"b{seed}", 3), fixes=True, tokens=40 - 5 * seed),
        },
    )
    ev = Evaluator(data, seeds=[0])
    report = {"data": data.describe(), "seeds": [0], "confidence": 0.95, "runs": [ev.evaluate(pol)]}
    return write_eval_report(report, folder / "eval")


def test_load_run_tolerates_a_torn_line_and_finds_keys(tmp_path):
    run = load_run(fake_run(tmp_path / "agon-seed0", "agon"))
    assert len(run.records) == 30 and run.label == "agon-seed0"
    assert run.find(M.ACC, "agent_b", "challenger") == "acc/agent_b/challenger"
    assert run.find(M.CONVERSION) == "conversion_rate"
    assert run.find(M.WIN, "agent_b") == "win_rate/agent_b"
    assert run.find(M.WIN, "agent_c") is None


def test_a_folder_without_metrics_fails_with_one_clear_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoMetricsError, match=r"no metrics\.jsonl"):
        load_run(tmp_path / "empty")
    with pytest.raises(NoMetricsError, match="no such run folder"):
        load_run(tmp_path / "missing")


def test_plot_all_writes_four_figures_for_two_runs(tmp_path):
    a = fake_run(tmp_path / "agon-seed0", "agon")
    g = fake_run(tmp_path / "grpo-seed0", "grpo", steps=20, seed=1)
    fake_eval(a, 0)
    fake_eval(g, 1)
    out = tmp_path / "plots"
    paths = plot_all([a, g], out)
    names = sorted(p.name for p in paths)
    assert names == [
        "accuracy_vs_length.png",
        "trace_length.png",
        "training_curves.png",
        "win_conversion.png",
    ]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_plot_all_needs_something(tmp_path):
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_all([], tmp_path)
