"""Two stored ``agon eval`` reports of the same problems, compared paired: a run against a run.

``agon eval`` compares the runs it evaluates together (``across_runs``); this compares two
reports of trained runs (each report's first run) written at different times, e.g. an
exploratory run against one unit of a study, on the problems and seeds both hold (it refuses
reports of other problems). Methods are a
report's keys (``standalone:agent_a``, ``cascade:agent_a>agent_b``) or two names:
``standalone`` (the mean of the run's adapters, per problem: one for grpo) and ``chosen`` (the cascade
direction the report chose on validation). For two-turn methods it also gives what the
second turn did with the draft it read (right drafts kept, wrong drafts fixed) and how often
the final turn kept the answer format.

    python benchmarks/paired_evals.py X/eval.json Y/eval.json [--methods standalone chosen]
    python benchmarks/paired_evals.py X/eval.json STUDY/results.json --y-unit agon-latent:0

Either side may be one unit (``ARM:SEED``) of a study's results file (``agon study``'s, or one of
the recorded ``docs/results/*.json``) instead of an eval report: its outcome lists are read as
episodes of the file's test problems; it records no answer format, so that count is left out.

Intervals: :func:`agon_env.stats.paired_bootstrap` over seeds and problems. Prints one JSON
object as its last line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from agon_env.evaluation.evaluate import stored_episodes
from agon_env.evaluation.report_file import read_eval_report
from agon_env.stats import paired_bootstrap
from agon_env.study.results_file import ResultsFileError, read_results

STANDALONE = ("standalone:agent_a", "standalone:agent_b")


def _episode(problem_id: str, correct: int, first: list[int] | None, i: int) -> dict[str, Any]:
    """Outcome ``i`` of a unit as an eval report's episode (two turns where it has draft outcomes)."""
    return {
        "problem_id": problem_id,
        "correct": bool(correct),
        "first_correct": None if first is None else bool(first[i]),
        "turns": [{}] if first is None else [{}, {}],
    }


def unit_report(doc: dict[str, Any], unit: str, label: str) -> dict[str, Any]:
    """Unit ``ARM:SEED`` of a study results file in an eval report's shape (its first run):
    each method's outcome list (evaluation seeds' blocks of the file's test problems) as episodes,
    a two-turn method's draft outcomes as ``first_correct``, the cascade chosen on validation."""
    arm, _, seed = unit.rpartition(":")
    arms = doc["outcomes"]["arms"]
    if arm not in arms or seed not in arms[arm]:
        have = ", ".join(f"{a}:{s}" for a, seeds in arms.items() for s in seeds)
        raise SystemExit(f"{label} has no unit {unit!r}; it has {have}")
    r = arms[arm][seed]
    ids, seeds = doc["problems"]["test"]["ids"], doc["plan"]["eval_seeds"]
    methods = {}
    for m, outcomes in r["outcomes"].items():
        first = r["first_outcomes"].get(m)
        if len(outcomes) != len(ids) * len(seeds):
            raise SystemExit(f"{label} {unit} {m}: {len(outcomes)} outcomes for {len(ids)} problems")
        methods[m] = {"episodes": [_episode(ids[i % len(ids)], c, first, i) for i, c in enumerate(outcomes)]}
    run = {"label": f"{arm}-seed{seed} of {label}", "methods": methods}
    if r.get("chosen_cascade"):
        run["selection"] = {"chosen": r["chosen_cascade"]}
    return {"seeds": seeds, "runs": [run]}


def read(path: Path, unit: str | None) -> dict[str, Any]:
    """An eval report, or ``unit`` of a study results file."""
    try:
        doc = read_results(path).document
    except ResultsFileError:  # not a study's results: an eval report
        if unit:
            raise SystemExit(
                f"{path} is an eval report, not a study results file: drop its --*-unit"
            ) from None
        return dict(read_eval_report(path).document)
    if not unit:
        raise SystemExit(f"{path} is a study results file: name a unit (--x-unit/--y-unit ARM:SEED)")
    return unit_report(doc, unit, str(path))


def results(run: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """Each underlying method's stored result (one per adapter for ``standalone``), ``chosen`` resolved."""
    if method == "chosen" and "selection" not in run:
        raise SystemExit(f"{run['label']} chose no cascade direction: name its method instead of 'chosen'")
    keys = (
        [k for k in STANDALONE if k in run["methods"]]  # one adapter for grpo
        if method == "standalone"
        else [run["selection"]["chosen"] if method == "chosen" else method]
    )
    unknown = [k for k in keys if k not in run["methods"]]
    if unknown:
        raise SystemExit(f"{run['label']} has no method {unknown[0]!r}; it has {sorted(run['methods'])}")
    return [run["methods"][k] for k in keys]


def table(
    run: dict[str, Any], method: str, cells: list[tuple[int, str]], seeds: list[int]
) -> list[list[float]]:
    """Outcomes as seeds × problems (``cells``: the (seed, problem) pairs, in order), averaged over
    the underlying methods."""
    per = [
        {k: float(e["correct"]) for k, e in stored_episodes(r, seeds).items()} for r in results(run, method)
    ]
    rows = sorted({s for s, _ in cells})
    return [[sum(p[(s, q)] for p in per) / len(per) for s2, q in cells if s2 == s] for s in rows]


def second_turn(run: dict[str, Any], method: str) -> dict[str, Any] | None:
    """Right drafts kept, wrong drafts fixed, final turns in format (two-turn methods only)."""
    eps = [e for r in results(run, method) for e in r["episodes"]]
    if not eps or len(eps[0]["turns"]) < 2:
        return None
    right = [e for e in eps if e["first_correct"]]
    wrong = [e for e in eps if not e["first_correct"]]
    out = {
        "kept": [sum(e["correct"] for e in right), len(right)],
        "fixed": [sum(e["correct"] for e in wrong), len(wrong)],
    }
    if all("format_ok" in e["turns"][-1] for e in eps):  # a results file records no format
        out["final_format"] = [sum(e["turns"][-1]["format_ok"] for e in eps), len(eps)]
    return out


def compare(x: dict[str, Any], y: dict[str, Any], methods: list[str]) -> dict[str, Any]:
    rx, ry = x["runs"][0], y["runs"][0]
    seeds = x["seeds"]
    cx = set(stored_episodes(rx["methods"][STANDALONE[0]], seeds))
    if y["seeds"] != seeds or cx != set(stored_episodes(ry["methods"][STANDALONE[0]], seeds)):
        raise SystemExit("the two reports hold different (seed, problem) pairs: not comparable")
    cells = sorted(cx)
    out: dict[str, Any] = {"x": rx["label"], "y": ry["label"], "problems": len(cells), "methods": {}}
    for m in methods:
        tx, ty = table(rx, m, cells, seeds), table(ry, m, cells, seeds)
        d = paired_bootstrap(tx, ty)
        out["methods"][m] = {
            "x_method": rx["selection"]["chosen"] if m == "chosen" else m,  # results() checked it
            "y_method": ry["selection"]["chosen"] if m == "chosen" else m,
            "x_pass@1": sum(map(sum, tx)) / len(cells),
            "y_pass@1": sum(map(sum, ty)) / len(cells),
            "difference": d.to_dict(),
            "x_second_turn": second_turn(rx, m),
            "y_second_turn": second_turn(ry, m),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("x", type=Path, help="an eval.json or a study results file (the difference is x - y)")
    ap.add_argument("y", type=Path, help="another, of the same problems and seeds")
    ap.add_argument("--x-unit", default=None, help="ARM:SEED, when x is a study results file")
    ap.add_argument("--y-unit", default=None, help="ARM:SEED, when y is a study results file")
    ap.add_argument("--methods", nargs="+", default=["standalone", "chosen"])
    args = ap.parse_args()
    res = compare(read(args.x, args.x_unit), read(args.y, args.y_unit), args.methods)
    print(f"x = {res['x']}\ny = {res['y']}\n{res['problems']} (seed, problem) pairs")
    for m, r in res["methods"].items():
        d = r["difference"]
        ci = f"[{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"
        print(
            f"{m}: x {100 * r['x_pass@1']:.1f} % ({r['x_method']}), y {100 * r['y_pass@1']:.1f} % "
            f"({r['y_method']}), x - y {100 * d['mean']:+.1f} pp {ci}"
        )
        for side in ("x", "y"):
            t = r[f"{side}_second_turn"]
            if t:
                print("  " + side + ": " + ", ".join(f"{k} {a}/{n}" for k, (a, n) in t.items()))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
