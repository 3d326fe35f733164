"""A study's tables and figure, rendered from its results document alone.

:func:`write` saves the document (:func:`agon_env.study.results.build`) and its report, and
regenerates the Markdown between a docs file's ``<!-- BLOCK:begin -->`` / ``end`` markers and
the figure: accuracy vs trace length per arm and method, and over training how often the
challenger's answer differs from the draft it read.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from agon_env import metric_names as M
from agon_env.errors import InputError
from agon_env.evaluation.probe import fix_needed
from agon_env.evaluation.report import write_text_atomic
from agon_env.figures import pyplot, save
from agon_env.json_value import JSONRecord
from agon_env.stats import least_discordant, smoothed
from agon_env.study.analysis import (
    CHANGED,
    NOT_SHOWN,
    compared,
    coverage,
    second_turn_change,
    second_turn_net,
    second_turn_runs,
    two_stage_methods,
    verdict,
)
from agon_env.study.analysis import rule as rule_of
from agon_env.study.folder import FIGURE as FIGURE_FILE
from agon_env.study.folder import StudyFolder
from agon_env.study.health import notes
from agon_env.study.plan import split
from agon_env.study.registration import describe
from agon_env.study.results_file import PairedDifference, ResultsDocument, UnitOutcome
from agon_env.study.transfer import markdown as transfer_markdown
from agon_env.study.verify import late, unbound
from agon_env.upgrade import OLD_METRICS, pre_study, shown_metric
from agon_env.vocabulary import CHALLENGER, DRAFTER, SEATS

FIGURE = "img/replication_cpu_accuracy_vs_length.png"
"""The first replication's figure, relative to the docs file (it is written next to it)."""
BLOCK = "replication"
"""The first replication's block name; another (``--block``) gets its own markers and figure,
so several replications (e.g. before and after a prompt change) share one docs page."""


def markers(block: str = BLOCK) -> tuple[str, str]:
    return f"<!-- {block}:begin -->", f"<!-- {block}:end -->"


BEGIN, END = markers()


def figure_name(block: str = BLOCK) -> str:
    return FIGURE if block == BLOCK else f"img/{block}_accuracy_vs_length.png"


LABELS = {
    "standalone": "standalone, mean of its adapters",
    "standalone:agent_a": "standalone agent_a",
    "standalone:agent_b": "standalone agent_b",
}
BASE_ROWS = {
    "base-few-shot": "few-shot (worked examples)",
    "base-zero-shot": "zero-shot (no worked examples)",
    "moa": "MoA (base drafts, base refines)",
}
TWO_STAGE_LABELS = {
    "self-cascade": "self-cascade (its own draft, then itself)",
    "cascade": "cascade, direction chosen on validation",
}


def changed_key(runs: list[UnitOutcome]) -> str:
    """The training key of the challenge-changed-answer rate: a replication recorded before
    issue #22 has only the legacy one (which also counted a one-sided missing answer)."""

    def has(key: str) -> bool:
        return any((r["training"].get(key) or {}).get("all") is not None for r in runs)

    return shown_metric(CHANGED, has)


def task_label(task: JSONRecord) -> str:
    """``agon/arith-v0`` level 2.5 (a recorded study's level), or an env with its keywords
    (``agon/divides-v0`` options=3)."""
    level = "" if task.get("difficulty") is None else f" level {task['difficulty']}"
    words = " ".join(f"{k}={v}" for k, v in task.get("kwargs", {}).items())
    return f"`{task['env']}`{level}" + (f" {words}" if words else "")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def pick(arm: str, seed: str, run: UnitOutcome) -> str:
    """One validation choice with what it rested on: a tie or a few problems is not a finding."""
    chosen = run["chosen_cascade"]
    other = next((k for k in (run.get("validation") or {}) if k != chosen), None)
    short = chosen.split(":")[1]
    if other is None:
        return f"{arm} s{seed}: {short}"
    val, test = run["validation"], run["outcomes"]
    n = len(test[chosen])
    return (
        f"{arm} s{seed}: {short}, {val[chosen]['successes']}/{val[chosen]['trials']} vs "
        f"{val[other]['successes']}/{val[other]['trials']}, then {sum(test[chosen])} vs "
        f"{sum(test[other])} of {n}"
    )


def verdict_cell(doc: ResultsDocument, name: str, diff: PairedDifference) -> str:
    """A paired difference's verdict under the plan's decision rule, or why it gets none: a
    comparison that is not primary, not in the registration, or added at report time is
    exploratory (what the rule would say is still shown). Studies recorded before ``agon study``
    give every pair the rule's verdict, as their tables always did."""
    first, _, rest = name.partition(" − ")
    pair = [first, rest.rpartition(", ")[0]]
    plan = doc["plan"]
    old = pre_study(plan)
    if old is not None and pair not in doc.get("added_comparisons", []):
        return verdict(diff, first, not_shown=old.not_shown)
    registration = doc.get("registration")
    # The registered rule decides (analysis.rule); a plan changed after its registration decides nothing.
    decided = rule_of(doc)
    said = verdict(
        diff, first, decided.get("every_seed", True), decided.get("equivalence_margin"), coverage(doc)
    )
    if not doc.get("complete", True):  # the rule is for every planned seed, not those finished so far
        # an equivalence needs every planned seed: a part of them never shows one
        said = "interim: " + (
            f"{NOT_SHOWN} (equivalence is decided on every seed)" if said.startswith("equivalent") else said
        )
    registered = (
        None if registration is None else [list(split(c)) for c in registration["plan"]["comparisons"]]
    )
    hashes = (doc.get("hashes", {}).get("plan_sha256"), (registration or {}).get("plan_sha256"))
    changed = None not in hashes and hashes[0] != hashes[1]
    if changed:
        why = "the plan differs from its registration"
    elif unbound(doc):
        why = "the results file differs from its registration"
    elif late(doc):
        why = "registered after the results"
    elif pair not in plan.get("comparisons", []):
        why = (
            "added after the plan" if pair in doc.get("added_comparisons", []) else "exploratory in the plan"
        )
    elif registered is None:
        why = "study not registered"
    elif pair not in registered:
        why = "not in the registration"
    else:
        return said
    return f"exploratory ({why}): {said}"


def rule_words(decided: JSONRecord) -> str:
    """The decision rule in words, with what the verdicts mean (and do not)."""
    conf = f"{100 * decided.get('confidence', 0.95):g} %"
    margin = decided.get("equivalence_margin")
    seeds = " and every seed's difference has its sign" if decided.get("every_seed", True) else ""
    need = least_discordant(decided.get("confidence", 0.95))
    return (
        f"Decision rule: a difference is shown when its {conf} bootstrap interval excludes 0{seeds}; "
        + (
            f"the arms are equivalent when that interval lies inside ±{100 * margin:g} pp; "
            if margin
            else "no equivalence is claimed (no margin); "
        )
        + '"cannot tell" when both arms sit at floor or ceiling on every problem, or fewer than '
        f'{need} problems tell them apart (discordant pairs); otherwise "difference not shown", '
        "which is not evidence that there is none."
    )


def registration_words(doc: ResultsDocument) -> list[str]:
    """Whether and when the plan was registered, the rule in words and the detectable difference."""
    reg = doc.get("registration")
    if not reg:
        said = "Not registered: every comparison is exploratory."
    else:
        commit = reg.get("git_commit") or "none recorded"
        said = (
            f"Registered {reg.get('registered_at', 'at an unknown time')} (plan sha256 "
            f"{str(reg.get('plan_sha256'))[:12]}, study commit {commit})."
        )
        if late(doc):
            said += " Registered after the results: every verdict is exploratory."
        elif unbound(doc):
            said += " The results file departs from it: every verdict is exploratory."
    power = (reg or {}).get("detectable")
    detect = (
        f"{describe(power)[0].upper()}{describe(power)[1:]}." if power else "Detectable difference: unknown."
    )
    return [f"{said} {rule_words(rule_of(doc))} {detect}"]


def verifier_failures(doc: ResultsDocument) -> list[str]:
    """Score errors and time-outs of the verifier, per unit and method ("unknown": not recorded),
    and the answers left out of pass@1 for them (null outcomes: :func:`agon_env.stats.judged`)."""
    o = doc["outcomes"]
    units = {f"{arm}-seed{s}": r for arm, seeds in o["arms"].items() for s, r in seeds.items()}
    if o.get("base"):
        units = {"base": o["base"], **units}
    lines = [
        "Verifier failures per unit and method (score errors / time-outs; a two-turn method counts "
        "both turns together; unknown: not recorded; an answer not judged is left out of pass@1, not "
        "counted wrong):",
        "",
        "| unit | method | score errors | time-outs | final answers left out of pass@1 |",
        "|---|---|---|---|---|",
    ]
    for name, run in units.items():
        errors, timeouts = run.get("score_errors"), run.get("score_timeouts")
        for m in run["outcomes"]:
            e = "unknown" if (errors or {}).get(m) is None else str(errors[m])
            t = "unknown" if (timeouts or {}).get(m) is None else str(timeouts[m])
            left_out = sum(v is None for v in run["outcomes"][m])
            lines.append(f"| {name} | {m} | {e} | {t} | {left_out} |")
    return lines


def _recorded(doc: ResultsDocument) -> bool:
    """A study recorded before ``agon study`` (its plan has no comparisons): its own wording."""
    return "comparisons" not in doc["plan"]


def _cov(doc: ResultsDocument) -> str:
    return f"{100 * coverage(doc):g} %"


def setting(plan: JSONRecord, key: str) -> str:
    """A header setting as the arms ran it: their one value, or each value with the arms that ran
    it (``0.0001 (agon@lr=1e-4, grpo@lr=1e-4) or 0.0005 (...)``); a results file recorded before
    ``arm_settings`` has the training base's alone."""
    by_arm = plan.get("arm_settings")
    if not by_arm:
        return str(plan[key])
    arms: dict[str, list[str]] = {}
    for arm, own in by_arm.items():
        arms.setdefault(str(own[key]), []).append(arm)
    if len(arms) == 1:
        return next(iter(arms))
    return " or ".join(f"{value} ({', '.join(names)})" for value, names in arms.items())


def introduction(doc: ResultsDocument, results: str) -> list[str]:
    """Where the tables come from, the study's settings and what its intervals mean."""
    s, p, probs = doc["summary"], doc["plan"], doc["problems"]
    measured = doc["calibration"]["measured"].items()
    cal = ", ".join(f"{d if '=' in d else f'level {d}'}: {v['successes']}/{v['trials']}" for d, v in measured)
    cal = f" (base few-shot on validation: {cal})" if cal else ""
    failed = doc.get("failed_units") or {}
    missing = [f"{m} (FAILED: {failed[m]})" if m in failed else m for m in doc["outcomes"]["missing"]]
    status = "complete" if doc["complete"] else "INCOMPLETE: missing " + ", ".join(missing)
    shown = f"Every table uses the seeds all arms have finished: {', '.join(s['seeds']) or 'none'}"
    shown += f" (finished but not yet compared: {', '.join(s['left_out'])})." if s["left_out"] else "."
    return [
        f"Generated by `agon study report` from `{results}` ({status}).",
        "",
        f"`{doc['model']}` on {task_label(doc['task'])}{cal}; {setting(p, 'steps')} steps × B = "
        f"{setting(p, 'batch_problems')} × N = {setting(p, 'num_generations')}, "
        f"T = {setting(p, 'temperature')}, {setting(p, 'max_new_tokens')} new tokens, "
        f"lr {setting(p, 'lr')}, planned seeds "
        f"{', '.join(map(str, p['seeds']))}. {shown} "
        f"{len(probs['test']['ids'])} test problems (in the training pool: "
        f"{probs['test_prompts_in_training_pool']}; in validation: {probs['test_prompts_in_validation']}), "
        f"{len(probs['validation']['ids'])} validation problems for the cascade direction, one sample per "
        f"problem and seed. Intervals: {_cov(doc)} percentile bootstrap over seeds and problems; with this "
        "few seeds it understates seed-to-seed variation, so the paired table also gives each seed's "
        "difference and a Student-t interval over seeds alone.",
    ]


def pass_at_1(doc: ResultsDocument) -> list[str]:
    """pass@1 per arm and method (the untrained base first), with its interval and per seed."""
    s, families = doc["summary"], two_stage_methods(doc)
    lines = [
        f"| arm | method | pass@1 (%) | {_cov(doc)} CI (%) | per seed (%) | mean trace (tokens) |",
        "|---|---|---|---|---|---|",
    ]
    for m, r in s["base"].items():
        low, high = r["interval"]
        label = BASE_ROWS.get(m, m)
        lines.append(
            f"| untrained base | {label} | {_pct(r['mean'])} | [{_pct(low)}, {_pct(high)}] | – "
            f"| {r['mean_length']:.1f} |"
        )
    for arm, rows in s["arms"].items():
        directions = sorted(m for m in rows if m.startswith("cascade:"))
        for m in ("standalone", "standalone:agent_a", "standalone:agent_b", "two-stage", *directions):
            if m not in rows or (m == "standalone" and "standalone:agent_b" not in rows):
                continue
            r = rows[m]
            per = " · ".join(f"s{k} {_pct(v)}" for k, v in r["per_seed"].items())
            label = TWO_STAGE_LABELS[families[arm]] if m == "two-stage" else LABELS.get(m)
            if label is None:  # both directions, so a validation pick can be read against them
                label = f"cascade {m.split(':')[1]} (each direction, for reference)"
            mean = f"**{_pct(r['mean'])}**" if m in LABELS or m == "two-stage" else _pct(r["mean"])
            low, high = r["interval"]
            lines.append(
                f"| {arm} | {label} | {mean} | [{_pct(low)}, {_pct(high)}] | {per} | {r['mean_length']:.1f} |"
            )
    return lines


def paired_differences(doc: ResultsDocument) -> list[str]:
    """Each planned comparison: its paired difference, intervals and the decision rule's verdict."""
    cov = _cov(doc)
    recorded = _recorded(doc)
    every_seed = (rule_of(doc) if not recorded else doc["plan"].get("decision", {})).get("every_seed", True)
    rule = "decision rule: CI" + (" and every seed agree" if every_seed else "")
    rule += "" if doc["complete"] else " (interim)"
    lines = [
        f"| paired difference | pass@1 (pp) | {cov} CI, seeds × problems (pp) | per seed (pp) "
        f"| {cov} CI over seeds, t (pp) | {rule} |",
        "|---|---|---|---|---|---|",
    ]
    for name, d in doc["summary"]["paired"].items():
        per = " · ".join(f"s{k} {100 * v:+.1f}" for k, v in d["per_seed"].items())
        t = d["t_interval_over_seeds"]
        over = "– (one seed)" if t is None else f"[{100 * t[0]:+.1f}, {100 * t[1]:+.1f}]"
        # two seeds: one degree of freedom (t = 12.71 at 95 %), and a difference's range holds it
        over += " (1 df)" if t is not None and len(d["per_seed"]) == 2 else ""
        lines.append(
            f"| {name} | {100 * d['mean']:+.1f} | [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}] | "
            f"{per} | {over} | {verdict_cell(doc, name, d)} |"
        )
    return lines


def second_turns(doc: ResultsDocument) -> list[str]:
    """What each two-stage method's second turn did with the draft it read (none: no such method)."""
    s = doc["summary"]
    if not s.get("second_turn"):
        return []
    lines = [
        "What the second turn did with the draft it read (compared seeds pooled; fix needed: the fix "
        "rate at which the second turn would break even at its keep rate, as in the probe):",
        "",
        "| two-stage method | right drafts kept | wrong drafts fixed | fix needed to break even "
        f"| two-stage − drafts (pp) | {_cov(doc)} CI, seeds × problems (pp) |",
        "|---|---|---|---|---|---|",
    ]
    runs = second_turn_runs(doc)
    for name, t in s["second_turn"].items():
        kept = f"{t['kept']}/{t['right_drafts']} = {100 * t['kept'] / max(1, t['right_drafts']):.0f} %"
        fixed = f"{t['fixed']}/{t['wrong_drafts']} = {100 * t['fixed'] / max(1, t['wrong_drafts']):.0f} %"
        iv = second_turn_change(*runs[name], coverage(doc))  # the summary names the same methods
        ci = "–" if iv is None else f"[{100 * iv.low:+.1f}, {100 * iv.high:+.1f}]"
        drafts = t["right_drafts"] + t["wrong_drafts"]
        keep = t["kept"] / t["right_drafts"] if t["right_drafts"] else None
        need = fix_needed(t["right_drafts"] / drafts, keep)
        lines.append(
            f"| {name} | {kept} | {fixed} | {'–' if need is None else f'{100 * need:.0f} %'} "
            f"| {100 * second_turn_net(t):+.1f} | {ci} |"
        )
    return lines


def alike_adapters(doc: ResultsDocument) -> list[str]:
    """How alike each pair's adapters are on test (none: the summary has no pairs)."""
    pairs = doc["summary"].get("alike")
    if not pairs:
        return []
    lines = [
        "How alike each pair's adapters are on test (standalone, compared seeds pooled): a "
        "cascade can only gain where exactly one of them is wrong. Answers differ: where both "
        "answered, how often the two adapters' own answers to a problem differ"
        + (
            " (–: evaluated before that was recorded)."
            if any("answers_differ" not in a for a in pairs.values())
            else "."
        ),
        "",
        "| arm | both wrong | both wrong if independent | exactly one wrong | answers differ |",
        "|---|---|---|---|---|",
    ]
    for arm, a in pairs.items():
        n, d = a["problems"], a.get("answers_differ")
        differ = "–" if d is None else f"{d['differ']}/{d['both_answered']}"
        lines.append(
            f"| {arm} | {a['both_wrong']}/{n} | {a['both_wrong_if_independent']:.0f} "
            f"| {a['exactly_one_wrong']}/{n} | {differ} |"
        )
    return lines


def _training_cells(seeds: JSONRecord, changed: str) -> list[str]:
    """One arm's row of the training table: each metric's first → last fifth, over its seeds."""

    def avg(key: str, part: str) -> float | None:
        rows = [r["training"].get(key) or {} for r in seeds.values()]  # unlogged: missing or None
        vals = [row[part] for row in rows if row.get(part) is not None]
        return statistics.fmean(vals) if vals else None

    def move(key: str, scale: float = 100, digits: int = 0) -> str:
        a, b = avg(key, "first"), avg(key, "last")

        def f(v: float | None) -> str:
            return "–" if v is None else f"{scale * v:.{digits}f}"

        return f"{f(a)} → {f(b)}" if a is not None or b is not None else "–"

    wa, wb = (avg(M.key(M.WIN, seat), "all") for seat in SEATS)
    win = "–" if wa is None else f"{100 * wa:.0f} / {100 * (wb or 0):.0f}"
    times = [t for r in seeds.values() for t in r["training"]["per_step"].get(M.TIME_STEP) or [] if t]
    step = statistics.median(times) if times else avg(M.TIME_STEP, "all")
    return [
        move(M.key(M.ACC, DRAFTER)),
        move(M.key(M.ACC, CHALLENGER)),
        move(M.CONVERSION),
        win,
        move(M.DRAFT_UNUSABLE),
        move(M.SUMMARY_LEAK),
        move(changed),
        move(M.KL, 1, 3),
        move(M.key(M.LEN_TOKENS, DRAFTER), 1, 0),
        move(M.LATENT_EMPTY),
        "–" if step is None else f"{step:.0f}",
    ]


def over_training(doc: ResultsDocument) -> list[str]:
    """Each arm's training rates, first → last fifth of the steps, and its step time."""
    recorded = _recorded(doc)
    arms = compared(doc["outcomes"]["arms"])
    changed = changed_key([r for seeds in arms.values() for r in seeds.values()])
    old = OLD_METRICS.get(changed)
    lines = [
        "Over training (mean over the compared seeds; first → last fifth of the steps; step: median "
        + (
            "wall seconds, two units sharing the 2 cores with one torch thread each"
            if recorded
            else "wall seconds"
        )
        + "). Challenge changed "
        "answer: of the challenges that read a draft, how often the challenger's final answer "
        "differs from the draft's — not how alike the two adapters are (a step's drafts all come "
        "from one adapter)"
        + (f"; † recorded as `{changed}`, {old.definition}" if old else "")
        + ". KL(drafter‖challenger): per token on the drafter's samples; the drafter alternates "
        "between the adapters step by step. latent/empty: of the challenges that read the draft's "
        "cache, how many had no span to read (– where the units did not log it):",
        "",
        "| arm | drafter acc (%) | challenger acc (%) | conversion (%) | win a / b (%) | draft_unusable (%) "
        f"| summary_leak (%) | challenge changed answer (%){' †' if old else ''} | KL(drafter‖challenger) "
        "| drafter tokens | latent/empty (%) | step (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, seeds in arms.items():
        lines.append(f"| {arm} | " + " | ".join(_training_cells(seeds, changed)) + " |")
    return lines


def cascade_picks(doc: ResultsDocument) -> list[str]:
    """The cascade direction each unit chose on validation (none: no unit chose one)."""
    arms = compared(doc["outcomes"]["arms"])
    picks = [pick(arm, k, r) for arm, seeds in arms.items() for k, r in seeds.items() if r["chosen_cascade"]]
    if not picks:
        return []
    return [
        "Cascade direction chosen on validation, per seed (chosen vs the other direction, on "
        "validation, then on test): " + "; ".join(picks) + "."
    ]


def markdown(
    doc: ResultsDocument, block: str = BLOCK, results: str = "docs/results/replication_cpu.json"
) -> str:
    """The study's report, one table after another (a study recorded before ``agon study`` has no
    registration or verifier counts to speak of); an empty section is left out."""
    recorded = _recorded(doc)
    title = "CPU replication" if recorded else doc["plan"]["study"]["name"]
    sections = [
        [*introduction(doc, results), "", *pass_at_1(doc)],
        notes(doc),
        [] if recorded else registration_words(doc),
        paired_differences(doc),
        [] if recorded else verifier_failures(doc),
        second_turns(doc),
        alike_adapters(doc),
        over_training(doc),
        cascade_picks(doc),
        [f"![accuracy vs trace length, {title}]({figure_name(block)})"],
    ]
    return "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"


def figure(doc: ResultsDocument, path: Path) -> Path:
    plt = pyplot()
    s = doc["summary"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    markers = {"standalone": "o", "two-stage": "s"}
    colors = {
        "grpo": "tab:blue",
        "coop": "tab:orange",
        "agon": "tab:green",
        "hidden-draft": "tab:purple",
        "agon-redacted": "tab:olive",
        "agon-latent": "tab:red",
        "agon-none": "tab:gray",
    }
    for m, r in s["base"].items():
        ax.errorbar(
            r["mean_length"],
            100 * r["mean"],
            yerr=[[100 * (r["mean"] - r["interval"][0])], [100 * (r["interval"][1] - r["mean"])]],
            fmt="^" if m == "moa" else "D",
            color="grey",
            capsize=3,
            label=f"base, {m.removeprefix('base-')}",
        )
    for arm, rows in s["arms"].items():
        for m, mk in markers.items():
            if m in rows:
                r = rows[m]
                ax.errorbar(
                    r["mean_length"],
                    100 * r["mean"],
                    yerr=[[100 * (r["mean"] - r["interval"][0])], [100 * (r["interval"][1] - r["mean"])]],
                    fmt=mk,
                    color=colors.get(arm, "k"),
                    capsize=3,
                    label=f"{arm} {m}",
                )
    ax.set_xlabel("mean trace length (tokens; two-stage: both turns)")
    ax.set_ylabel("test pass@1 (%)")
    ax.set_title("held-out accuracy vs trace length (95% CI over seeds and problems)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    for arm, seeds in compared(doc["outcomes"]["arms"]).items():
        key = changed_key(list(seeds.values()))
        series = [r["training"]["per_step"].get(key) for r in seeds.values()]
        series = [x for x in series if x and any(v is not None for v in x)]
        if not series:
            continue
        n = min(len(x) for x in series)
        mean = [statistics.fmean(v for x in series if (v := x[i]) is not None) for i in range(n)]
        smooth = smoothed(mean, 5)[0]
        bx.plot(range(n), [100 * v for v in smooth], color=colors.get(arm, "k"), label=arm)
    bx.set_xlabel("training step")
    old = OLD_METRICS.get(
        changed_key([r for seeds in compared(doc["outcomes"]["arms"]).values() for r in seeds.values()])
    )
    bx.set_ylabel("challenger changed the draft's answer (%)")
    bx.set_title(
        "challenges ending on another answer than the draft's (seed mean, 5-step mean)"
        + (f"\n† {old.short}" if old else ""),
        fontsize=9,
    )
    bx.grid(alpha=0.3)
    if bx.get_legend_handles_labels()[0]:
        bx.legend(fontsize=8)
    return save(fig, path)


def regenerate(doc: ResultsDocument, docs: Path, block: str, results: str) -> str:
    """Replace ``block``'s generated Markdown in ``docs`` and its figure next to it."""
    table = markdown(doc, block, results)
    begin, end = markers(block)
    page = docs.read_text()
    if begin not in page or end not in page:
        raise InputError(f"{docs} has no {begin} ... {end} block to regenerate")
    figure(doc, docs.parent / figure_name(block))
    span = re.escape(begin) + ".*?" + re.escape(end)
    write_text_atomic(docs, re.sub(span, lambda _: f"{begin}\n{table}{end}", page, flags=re.S))
    return table


def report_markdown(doc: ResultsDocument, results: str) -> str:
    """report.md's Markdown (``agon study verify --report`` renders it again to compare)."""
    table = markdown(doc, "report", results)
    table = table.replace(f"]({figure_name('report')})", f"]({FIGURE_FILE})")
    return table + transfer_markdown(doc)  # `agon study eval`'s exploratory sections, after the study's own


def write(doc: ResultsDocument, out: Path, results: str) -> str:
    """``out/report.md`` and ``out/accuracy_vs_length.png``; the Markdown."""
    table = report_markdown(doc, results)
    folder = StudyFolder(out)
    write_text_atomic(folder.report, table)
    figure(doc, folder.figure)
    return table
