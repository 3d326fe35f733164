"""Rendering an evaluation: the Markdown report shaped like the paper's Table 1.

The JSON (``eval.json``, per-episode outcomes included) is the record, written and read by
:mod:`agon_env.evaluation.report_file`; the Markdown is rendered from it alone, so
``render_markdown(read_eval_report(path).document)`` reproduces a report from a saved file.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from agon_env.evaluation.methods import METHODS, method_of
from agon_env.evaluation.splits import overlap_count
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.stats import Rate, pooled, spread, t_interval
from agon_env.upgrade import method_id

REPORT_VERSION = 1


def method_label(method_id: str, result: JSONRecord | None = None) -> str:
    m = method_of(method_id, (result or {}).get("policies", ()))
    if m is None:
        return method_id
    return m.label((result or {}).get("selected"))


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _ci(r: JSONRecord) -> str:
    return f"[{_pct(r['low'])}, {_pct(r['high'])}]"


def _t_ci(r: JSONRecord, runs: int) -> str:
    """A t-interval over runs, in the rate's range (reports written before it was clipped may not
    be); with 2 runs it rests on one degree of freedom (t = 12.71 at 95 %), which it says."""
    shown = _ci({"low": max(0.0, r["low"]), "high": min(1.0, r["high"])})
    return shown + (" (1 df)" if runs == 2 else "")


def method_interval(m: JSONRecord, many_seeds: bool) -> JSONRecord:
    """The pass@1 interval the tables and the accuracy-vs-length figure show for a method result.

    With several seeds a problem's samples are not independent trials: the problem-clustered
    bootstrap (``pass@1_clustered``); with one sample per problem, Clopper–Pearson.
    """
    return m["pass@1_clustered"] if many_seeds and "pass@1_clustered" in m else m["pass@1"]


def _method_ci(m: JSONRecord, many_seeds: bool) -> str:
    return _ci(method_interval(m, many_seeds))


def _pass1(m: JSONRecord) -> str:
    seeds = m.get("pass@1_across_seeds") or {}
    if len(seeds.get("values") or ()) > 1:
        return f"{_pct(seeds['mean'])} ± {_pct(seeds['std'])}"
    return _pct(m["pass@1"]["rate"])


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


UNJUDGED_NOTE = "(reward 0; left out of pass@1 and every rate, not counted wrong: stats.judged)"


def _run_section(run: JSONRecord, report: JSONRecord) -> list[str]:
    methods = run["methods"]
    unit = next((m["length_unit"] for m in methods.values()), "tokens")
    many = len(report.get("seeds", [])) > 1
    lines = [f"## {run['label']}", ""]
    if run.get("settings"):
        lines += [_settings_text(run["settings"]), ""]
    header = [
        "Method",
        "pass@1 (%)" + (" mean ± std over seeds" if many else ""),
        "95% CI (%)",
        f"mean trace length ({unit})",
        f"median ({unit})",
        "n",
    ]
    rows = [
        [
            method_label(mid, m),
            _pass1(m),
            _method_ci(m, many),
            _num(m["mean_length"]),
            _num(m["median_length"]),
            str(m["pass@1"]["trials"]),
        ]
        for mid, m in methods.items()
    ]
    lines += _table(header, rows)
    lines.append("")
    lines.append(
        "pass@1 is the pooled fraction of correct final answers; the interval is "
        + (
            "a percentile bootstrap over problems (a problem's samples from all seeds resampled "
            "together, since they are not independent)."
            if many
            else "Clopper–Pearson."
        )
        + " Cascade lengths count both turns (the draft and the answer that read it)."
    )
    lines.append("")
    if many:
        ks = sorted({k for m in methods.values() for k in m.get("pass@k", {})}, key=int)
        lines += ["### pass@k over seeds (unbiased estimator)", ""]
        lines += _table(
            ["Method", *[f"pass@{k} (%)" for k in ks]],
            [
                [method_label(mid, m), *[_pct(m.get("pass@k", {}).get(k)) for k in ks]]
                for mid, m in methods.items()
            ],
        )
        lines.append("")
    read = [(mid, m) for mid, m in methods.items() if "draft_unusable" in m]
    if read:
        lines += ["### What the second turn read", ""]
        lines += _table(
            ["Method", "draft gave no usable summary (%)", "shown summary states the draft's answer (%)"],
            [
                [method_label(mid, m), _pct(m["draft_unusable"]), _pct(m.get("summary_leak"))]
                for mid, m in read
            ],
        )
        lines += [
            "",
            "The answer block is removed from the summary the reader is shown; the second column "
            "counts summaries that state the draft's result anyway (numbers compared by value).",
            "",
        ]
    errors = sum(m.get("score_errors", 0) for m in methods.values())
    if errors:
        lines += [f"**The task's score() gave no verdict on {errors} answers** {UNJUDGED_NOTE}.", ""]
    timeouts = sum(m.get("score_timeouts", 0) for m in methods.values())
    if timeouts:
        lines += [f"**The task's verifier timed out on {timeouts} answers** {UNJUDGED_NOTE}.", ""]
    sel = run.get("selection")
    if sel:
        val = sel["validation"]
        parts = ", ".join(f"{method_label(d)}: {_pct(v['rate'])}%" for d, v in val.items())
        lines += [
            "### Cascade direction",
            "",
            f"Chosen on {sel.get('validation_problems', '?')} validation problems (disjoint from test): "
            f"**{method_label(sel['chosen'])}**. Validation pass@1 — {parts}. Rule: {sel['rule']}.",
        ]
        if sel.get("test_oracle") is not None:
            verdict = "would have picked the other direction" if sel["post_hoc_differs"] else "agrees"
            lines.append(f"Picking on test instead (the post-hoc choice) {verdict}.")
        lines.append("")
    lines += _complementarity_section(run.get("complementarity") or {})
    return lines


def _complementarity_section(comp: JSONRecord) -> list[str]:
    if not comp:
        return []
    rows = []
    for key, title in (
        ("adapters", "trained {0} vs {1}, standalone"),
        ("base", "untrained base, two samples"),
    ):
        c = comp.get(key)
        if not c:
            continue
        conv = (
            "; ".join(
                f"{method_label(d).removeprefix('Cascade ').removesuffix(' (untrained base → base)')}: "
                f"{_pct(r['rate'])}% of {r['trials']}"
                for d, r in c.get("conversion", {}).items()
            )
            or "–"
        )
        differ = c.get("answers_differ")  # absent from reports written before it was measured
        rows.append(
            [
                title.format(*c["pair"]),
                f"{c['both_wrong']} ({_pct(c['both_wrong_rate'])}%)",
                f"{c['exactly_one_wrong']} ({_pct(c['exactly_one_wrong_rate'])}%)",
                _num(c["jaccard"], 2),
                "–"
                if not differ
                else f"{differ['differ']}/{differ['both_answered']} ({_pct(differ['rate'])}%)",
                conv,
            ]
        )
    lines = ["### Blind-spot complementarity (test)", ""]
    lines += _table(
        [
            "Pair",
            "both wrong",
            "exactly one wrong",
            "Jaccard of failure sets",
            "answers differ",
            "conversion P(reader right ∣ draft wrong)",
        ],
        rows,
    )
    lines += [
        "",
        "A lower Jaccard index means more different blind spots; conversion is measured in the "
        "cascade (trained pair, per direction) and in MoA (base). Answers differ: of the problem × "
        "seed pairs where both gave an answer, how often the two answers (each alone, same problem, "
        "same seed) differ as strings, whitespace and case ignored.",
        "",
    ]
    return lines


CHOSEN_CASCADE = "cascade (direction chosen on validation)"
"""Row of each run's own validation-chosen cascade (the direction may differ between runs)."""


def across_runs(runs: Sequence[JSONRecord], confidence: float = 0.95) -> JSONRecord:
    """Per algorithm with two or more runs: each method's pass@1 mean ± std over runs, a
    t-interval over runs, and the pooled interval. Runs of different algorithms are never
    pooled; the untrained base's methods (the same in every run) are left out."""
    groups: dict[str, list[JSONRecord]] = {}
    for r in runs:
        groups.setdefault(r.get("algo") or r["label"], []).append(r)
    out: JSONRecord = {}
    for algo, group in groups.items():
        if len(group) < 2:
            continue
        rows: dict[str, list[JSONRecord]] = {}
        for r in group:
            for mid, m in r["methods"].items():
                if not METHODS[method_id(m["family"])].uses_base:
                    rows.setdefault(mid, []).append(m)
            chosen = (r.get("selection") or {}).get("chosen")
            if chosen:
                rows.setdefault(CHOSEN_CASCADE, []).append(r["methods"][chosen])
        out[algo] = {mid: _spread_row(ms, confidence) for mid, ms in rows.items() if len(ms) == len(group)}
    return out


def _spread_row(methods: Sequence[JSONRecord], confidence: float) -> JSONRecord:
    rates = [m["pass@1"] for m in methods]
    interval = t_interval([x["rate"] for x in rates], confidence, bounds=(0.0, 1.0))
    pooled_rate = pooled(
        [Rate(x["successes"], x["trials"], x["low"], x["high"], x.get("unjudged", 0)) for x in rates],
        confidence,
    )
    return {
        "runs": len(methods),
        "pass@1_across_runs": spread([x["rate"] for x in rates]).__dict__,
        "pass@1_t_interval": None if interval is None else {"low": interval[0], "high": interval[1]},
        "pass@1_pooled": pooled_rate.to_dict(),
        "mean_length_across_runs": spread([m["mean_length"] for m in methods]).__dict__,
    }


def _disjoint(data: JSONRecord) -> str:
    check = data.get("disjoint") or {}
    if not check:
        return "disjointness not checked"
    training = check.get("test_and_training") or {}
    # Reports written before validation was checked against training have no such key.
    val_training = check.get("validation_and_training")
    overlaps = overlap_count(check)
    against = "validation" + (" and each run's training pool" if training else "")
    verdict = f"{overlaps} overlapping, allowed by --allow-overlap" if overlaps else "disjoint"
    out = f"{verdict}: test from {against}"
    if training and val_training is not None:
        out += ", validation from each run's training pool"
    return f"{out}, by {check['how']}"


def _sampling_text(report: JSONRecord) -> str:
    # ``None``: the runs were evaluated with different settings, each given in its section.
    if "sampling" in report and report["sampling"] is None:
        return "each run's own (below)"
    return json.dumps(report.get("sampling", {}))


def _settings_text(settings: JSONRecord) -> str:
    """One line of a run's settings: what its policies sampled at and read."""
    sampling, prompts = settings.get("sampling") or {}, settings.get("prompts") or {}
    temps = ", ".join(f"{n} {t:g}" for n, t in (settings.get("temperatures") or {}).items())
    shots = "with worked examples" if prompts.get("few_shot") else "without worked examples"
    template = settings.get("chat_template_kwargs")
    return (
        f"Settings: temperature {temps}; top_p {sampling.get('top_p')}; top_k {sampling.get('top_k')}; "
        f"max_new_tokens {sampling.get('max_new_tokens')}; prompt family {prompts.get('family')}, {shots}"
        + (f"; chat template {json.dumps(template)}" if template else "")
        + "."
    )


def render_markdown(report: JSONRecord) -> str:
    data = report["data"]
    lines = [
        f"# agon eval: {data['env']} ({data['task']})",
        "",
        f"{data['test_problems']} test problems, {data['validation_problems']} validation problems "
        f"({_disjoint(data)}), seeds {report['seeds']}, {int(100 * report['confidence'])}% intervals. "
        f"Sampling: {_sampling_text(report)}. Wall time {_num(report.get('seconds'), 0)} s.",
        "",
    ]
    for run in report["runs"]:
        lines += _run_section(run, report)
    across = report.get("across_runs") or {}
    if across:
        lines += ["## Across runs (per algorithm)", ""]
        rows = [
            [
                algo,
                mid if mid == CHOSEN_CASCADE else method_label(mid),
                str(v["runs"]),
                f"{_pct(v['pass@1_across_runs']['mean'])} ± {_pct(v['pass@1_across_runs']['std'])}",
                _t_ci(v["pass@1_t_interval"], v["runs"]) if v.get("pass@1_t_interval") else "–",
                _num(v["mean_length_across_runs"]["mean"]),
            ]
            for algo, methods in across.items()
            for mid, v in methods.items()
        ]
        lines += _table(
            [
                "Algorithm",
                "Method",
                "runs",
                "pass@1 (%) mean ± std",
                "95% t-interval over runs (%)",
                "mean length",
            ],
            rows,
        )
        lines += [
            "",
            "Runs are grouped by the algorithm that trained them; the interval treats runs as the "
            "independent units (seeds of training), not the problems within them.",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def clean(x: object) -> JSONValue:
    """``x`` as JSON can hold it (string keys, lists for tuples)."""
    # JSON has no NaN/inf: undefined statistics are written as null.
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


def write_text_atomic(path: Path, text: str) -> None:
    """All of ``text`` or nothing at ``path`` (written beside it, then renamed into place): a
    kill mid-write leaves the previous file, never half of the new one."""
    # A temporary name of its own per writer: two commands writing one file at once (two
    # `agon study run` on one folder) must not replace each other's half-written temporary.
    if path.exists() and not path.is_file():  # a device (/dev/null, /dev/full): written, never replaced
        path.write_text(text, encoding="utf-8")
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
