"""Metric sinks: JSONL truncation on resume, the summary table, the plot."""

from __future__ import annotations

import json
import math

import pytest
from algo_helpers import scripted

from agon_env.algorithms.run_log import MetricsLogger, plot, print_summary, summary_rows
from agon_env.run_folder import read_metrics


def test_resume_cuts_metrics_back_to_the_checkpoint(tmp_path):
    lines = [json.dumps({"step": s, "acc/drafter": s / 10}) for s in range(4)] + ['{"step": 4, "acc/dr']
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines))  # a killed run's half-written line
    logger = MetricsLogger(tmp_path, total_steps=6, start_step=2, progress=False)
    logger.log(2, {"acc/drafter": 0.9, "loss/agent_a": math.nan})
    logger.close()
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert records[-1]["acc/drafter"] == 0.9 and records[-1]["loss/agent_a"] is None  # NaN -> null


def test_summary_rows_compare_first_and_last_steps():
    # A metric that is no rate (reward) is judged on its per-step values.
    records = [{"step": s, "reward/drafter": float(s), "len_tokens/drafter": 30.0} for s in range(6)]
    rows = {k: (a, b, f"{c} {v}") for k, a, b, c, v in summary_rows(records, window=2)}
    assert rows["reward/drafter"][:2] == ("0.500", "4.500")  # mean of steps 0-1 and of steps 4-5
    # Welch over the per-step values: variance 0.5 per window, se = 0.7071, df = 2, t = 4.3027:
    # half-width 3.0424.
    assert rows["reward/drafter"][2] == "+4.000 [+0.958, +7.042] up"
    assert rows["len_tokens/drafter"] == ("30.000", "30.000", "+0.000 [+0.000, +0.000] no change")
    assert "conversion_rate" not in rows


def test_a_noisy_movement_is_labelled_within_noise():
    # Per-step rewards that swing by ±0.25 around 0.5, then 0.6: a +0.1 move inside the noise.
    rewards = [0.25, 0.75, 0.25, 0.75, 0.35, 0.85, 0.35, 0.85]
    records = [{"step": s, "reward/drafter": a} for s, a in enumerate(rewards)]
    (row,) = [r for r in summary_rows(records, window=4) if r[0] == "reward/drafter"]
    assert row[3].startswith("+0.100 [") and row[4] == "within noise"


def test_plot_writes_png(tmp_path):
    logger = MetricsLogger(tmp_path, total_steps=2, progress=False)
    for s in range(2):
        logger.log(s, {"reward/drafter": s, "acc/drafter": 0.5, "format/drafter": 1.0})
    logger.close()
    out = plot(tmp_path)
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"


def test_samples_are_written_per_step_cut_back_on_resume_and_sent_to_tensorboard(tmp_path):
    sample = {"seat": "agent_a", "role": "drafter", "reward": 2.5, "correct": True, "format_ok": True}
    sample |= {"tokens": 3, "prompt": "<|im_start|>user\nWhat is 1 + 1?", "completion": "<answer>2</answer>"}
    logger = MetricsLogger(tmp_path, total_steps=3, progress=False)
    for s in range(3):
        logger.log(s, {"acc/drafter": 1.0}, [dict(sample, reward=float(s))])
    logger.close()
    rows = [json.loads(ln) for ln in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [(r["step"], r["reward"], r["prompt"]) for r in rows] == [
        (s, float(s), sample["prompt"]) for s in range(3)
    ]
    MetricsLogger(tmp_path, total_steps=3, start_step=1, progress=False).close()  # resume after step 0
    assert [json.loads(ln)["step"] for ln in (tmp_path / "samples.jsonl").read_text().splitlines()] == [0]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0}).Reload()
    assert "samples/drafter/text_summary" in events.Tags()["tensors"]


def test_challenge_changed_answer_counts_only_read_drafts_with_both_answers():
    import agon_env
    from agon_env.algorithms.metrics import rollout_metrics
    from agon_env.algorithms.registry import get_algorithm
    from agon_env.algorithms.rollout import rollout
    from agon_env.metric_names import CHALLENGE_CHANGED_ANSWER, KL

    problems = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 3 + 3?", "answer": "6"}]
    drafts = [
        "<summary>added</summary><answer>4</answer>",
        "<summary>added</summary><answer>5</answer>",
        "<answer>6</answer>",  # no summary: the challenger is shown nothing to read
        "<summary>added</summary> but no answer block",
        "<summary>added</summary><answer>X + 1</answer>",
        "<summary>added</summary><answer>6</answer>",
    ]
    challenges = [
        "<answer>4</answer>",  # kept
        "<answer>4</answer>",  # changed
        "<answer>7</answer>",  # left out: unusable draft
        "<answer>6</answer>",  # left out: the draft gave no answer
        "<answer> x+1 </answer>",  # kept: whitespace and case are ignored
        "no answer at all",  # left out: the challenger gave no answer
    ]
    plugin = get_algorithm("agon")
    env = agon_env.make("agon/math-v0", problems=problems, mode=plugin.env_mode)
    seats = plugin.seats(0)
    agents = {
        seats["drafter"]: scripted(seats["drafter"], drafts)[0],
        seats["challenger"]: scripted(seats["challenger"], challenges)[0],
    }
    batch = rollout(env, agents, [0, 1, 0], 2, drafter=seats["drafter"])
    m = rollout_metrics(batch)
    assert m[CHALLENGE_CHANGED_ANSWER] == pytest.approx(1 / 3)  # 4→4, 5→4, x+1→x+1
    assert CHALLENGE_CHANGED_ANSWER == "divergence/challenge_changed_answer" and KL == "divergence/kl"


def test_a_killed_runs_folder_still_plots_and_summarises(tmp_path, capsys):
    # A run killed mid-write leaves its last metrics line cut off: the figure and the summary
    # are drawn from the steps before it.
    rows = [
        {"step": s, "reward/drafter": s / 4, "acc/drafter": s / 4, "format/drafter": 1.0} for s in range(4)
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "reward/dr'
    (tmp_path / "metrics.jsonl").write_text(text)
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1, 2, 3]
    out = plot(tmp_path)
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    print_summary(tmp_path)
    assert "4 steps" in capsys.readouterr().out


def test_a_cut_samples_log_is_repaired_on_resume_and_a_damaged_one_refused(tmp_path):
    from agon_env.run_folder import RunFolderError

    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"step": 0, "completion": "a"}\n{"step": 1, "completion": "b"}\n{"step": 2, "compl')
    MetricsLogger(tmp_path, total_steps=3, start_step=2, progress=False, report_to=()).close()
    assert samples.read_text() == '{"step": 0, "completion": "a"}\n{"step": 1, "completion": "b"}\n'
    # A bad line before the last is no kill's: it was dropped in silence, with whatever it held.
    samples.write_text('{"step": 0, "completion": "a"}\n{"step": 1, "compl\n{"step": 2, "completion": "c"}\n')
    with pytest.raises(RunFolderError, match=r"samples.jsonl line 2 is not a JSON object"):
        MetricsLogger(tmp_path, total_steps=3, start_step=2, progress=False, report_to=())
