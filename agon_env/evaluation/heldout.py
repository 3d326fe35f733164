"""The end-of-run held-out check: did training move accuracy on problems it never saw?

Per-step training accuracy is measured on the problems being trained on, a few episodes at
a time (±0.15 per step on the default run), so a run's summary cannot say whether the
adapters got better. This check can: after the last step (the base's half before the first,
when a time budget needs its measured time), the untrained base (adapters
disabled) and each trained adapter alone answer the same ``problems`` test-split problems,
disjoint by normalised prompt from the run's training pool (checked, not assumed), one
sample each at the run's sampling settings (each adapter at its own temperature when the
run set ``temperatures``, as it trained). It reports pass@1 with Clopper–Pearson
intervals and each adapter's paired difference from the base (percentile bootstrap over
problems), and says whether that difference is distinguishable from noise.

It uses the trainer's own base and generation backend (no reload) and is the
:class:`~agon_env.evaluation.evaluate.Evaluator` run with the base row of the run's prompts
(``base-few-shot``, or ``base-zero-shot`` for a run without worked examples) and
``standalone`` and no blind-spot extras: the methods, problems and sampling settings of
``agon eval RUN --methods base-few-shot standalone --val-problems 0 --problems N`` (its
sample streams are its own, so single samples differ). What it does not cover: one sample
per problem (sampling noise is inside the interval, seed-to-seed variation of training is
not — that takes several runs, ``agon study``), and nothing about the
cascade.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agon_env.evaluation.errors import NoHeldout
from agon_env.evaluation.evaluate import Evaluator, outcomes
from agon_env.evaluation.methods import BASE, Policies
from agon_env.evaluation.splits import (
    EvalData,
    OverlapError,
    Part,
    check_heldout,
    load_eval_data,
    training_pool,
)
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import RunFolder
from agon_env.stats import paired_bootstrap, rate, verdict_of
from agon_env.vocabulary import REFERENCE

if TYPE_CHECKING:
    from agon_env.agents.protocol import Agent


def heldout_policies(
    label: str,
    base_agent: Agent,
    adapters: Mapping[str, Agent],
    env_options: Mapping[str, JSONValue] | None = None,
) -> Policies:
    """The base and the run's adapter agents, named for the sample streams of the evaluator, in
    the env the run trained in (``env_options``: its keywords, ``ResolvedRun.reader_options``)."""
    return Policies(
        label=label,
        base=base_agent,
        adapters=dict(adapters),
        # Seeds keyed by the policy, never by ``label`` (the run folder's path): a run's held-out
        # check samples alike wherever the run lies (a resumed, a Ray and an uninterrupted unit).
        identities={BASE: "heldout:base", **{n: f"heldout:{n}" for n in adapters}},
        env_options=dict(env_options or {}),
    )


def base_method(policies: Policies) -> str:
    """The base row that shows the worked examples exactly when the run's prompts do."""
    prompts = getattr(policies.base, "prompts", None)
    return "base-zero-shot" if getattr(prompts, "few_shot", True) is False else "base-few-shot"


@dataclass
class BaseCheck:
    """The base's half of a held-out check, run before training: the problems and the base's
    results, and the seconds it took -- what the run's budget reserves for each adapter."""

    data: EvalData
    """The test problems (the adapters answer the same ones)."""
    report: JSONRecord
    """The evaluator's report of the base row (its ``seconds``: the sampling alone)."""
    seconds: float
    """Wall seconds of the whole half, problem loading and overlap check included."""

    def first(self, problems: int) -> BaseCheck:
        """The same check cut to its first ``problems`` problems (a budget with less room left)."""
        test = Part(self.data.test.task, self.data.test.indices[:problems])
        return BaseCheck(replace(self.data, test=test), self.report, self.seconds)


def heldout_base(
    env_id: str, task_kwargs: Mapping[str, JSONValue], policies: Policies, problems: int, seed: int = 0
) -> BaseCheck:
    """The untrained base on ``problems`` test problems (it does not change as the adapters
    train, so a run measures the check's speed with it before its first step)."""
    start = time.perf_counter()
    data = _heldout_data(env_id, task_kwargs, problems, seed)
    report = _evaluator(data, (base_method(policies),)).evaluate(policies)
    return BaseCheck(data, report, time.perf_counter() - start)


def _heldout_data(env_id: str, task_kwargs: Mapping[str, JSONValue], problems: int, seed: int) -> EvalData:
    try:
        data = load_eval_data(env_id, dict(task_kwargs), "test", problems, val_problems=0, seed=seed)
        # agon train has no --allow-overlap: the check is skipped, and says how to give it splits
        check_heldout(data, [("this run", training_pool(env_id, dict(task_kwargs)))], override=None)
    except (TypeError, OverlapError) as exc:  # an env that is no task (a wrapper), or no split
        raise NoHeldout(" ".join(str(exc).split())) from exc
    return data


def _evaluator(data: EvalData, methods: tuple[str, ...], confidence: float = 0.95) -> Evaluator:
    return Evaluator(data, seeds=(0,), methods=methods, confidence=confidence, blind_spots=False)


def heldout_check(
    env_id: str,
    task_kwargs: Mapping[str, JSONValue],
    policies: Policies,
    problems: int,
    seed: int = 0,
    confidence: float = 0.95,
    base: BaseCheck | None = None,
) -> JSONRecord:
    """Base and adapters on ``problems`` test problems; a JSON-ready dict (see :func:`table_rows`).
    With ``base`` (:func:`heldout_base` on the same problems) only the adapters are sampled now."""
    start = time.perf_counter() - (base.seconds if base else 0.0)
    data = base.data if base else _heldout_data(env_id, task_kwargs, problems, seed)
    # The base reads the prompts the adapters read, so the difference is training's alone.
    base_row = base_method(policies)
    methods = ("standalone",) if base else (base_row, "standalone")
    report = _evaluator(data, methods, confidence).evaluate(policies)
    if base:
        report["methods"] = {**base.report["methods"], **report["methods"]}
    ids = data.test.ids()
    base_out = outcomes(report["methods"][base_row], ids)
    base_rate = rate(base_out, confidence).to_dict()
    rows: JSONRecord = {
        BASE: {
            "outcomes": base_out,
            "pass@1": base_rate,
            "temperature": _temperature(policies.base),
            **_unjudged(report["methods"][base_row]),
        }
    }
    for name in policies.adapters:
        method = report["methods"][f"standalone:{name}"]
        got = outcomes(method, ids)
        both_judged = any(g is not None and b is not None for g, b in zip(got, base_out, strict=True))
        diff = paired_bootstrap([got], [base_out], confidence) if both_judged else None
        rows[name] = {
            "outcomes": got,
            "pass@1": rate(got, confidence).to_dict(),
            "minus_base": None if diff is None else diff.to_dict(),  # None: no problem judged for both
            "temperature": _temperature(policies.adapters[name]),
            **_unjudged(method),
        }
    return {
        "env": env_id,
        "task": data.describe()["task"],
        "task_kwargs": dict(task_kwargs),
        "split": "test",
        "problem_ids": ids,
        "disjoint": data.check,
        "confidence": confidence,
        "how": "one sample per problem at the run's sampling (each adapter at its own temperature); "
        "pass@1 Clopper–Pearson; "
        "adapter − base: percentile bootstrap over problems, paired on the problem",
        "policies": rows,
        "seconds": time.perf_counter() - start,
    }


def _unjudged(method: Mapping[str, JSONValue]) -> dict[str, int]:
    """The answers the task's verifier gave no verdict on (``null`` in ``outcomes``, in neither
    count of ``pass@1``, paired difference left out): errors, and time-outs (a code answer over
    its time limit among them)."""
    return {k: int(method.get(k, 0)) for k in ("score_errors", "score_timeouts")}


def _temperature(agent: Agent) -> float | None:
    """The temperature ``agent`` samples at, for the record (``None``: an agent without sampling)."""
    sampling = getattr(agent, "sampling", None)
    return getattr(sampling, "temperature", None)


def table_rows(result: Mapping[str, JSONValue]) -> list[tuple[str, str, str, str, str]]:
    """``(policy, pass@1, interval, change vs base, verdict)`` for the summary table."""
    out = []
    for name, row in result["policies"].items():
        r = row["pass@1"]
        cell = f"{r['successes']}/{r['trials']} = " + ("-" if r["rate"] is None else f"{r['rate']:.2f}")
        ci = f"[{r['low']:.2f}, {r['high']:.2f}]"
        if "minus_base" not in row:
            out.append((f"{name} (untrained)", cell, ci, "-", "-"))
            continue
        d = row["minus_base"]
        if d is None:
            out.append((name, cell, ci, "-", "nothing judged for both"))
            continue
        verdict = verdict_of(d["low"], d["high"], "better", "worse")
        out.append((name, cell, ci, f"{d['mean']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]", verdict))
    return out


@dataclass
class TrainedRunCheck:
    """``agon train``'s held-out check, and the one thing training calls in evaluation.

    ``agent(policy, adapter)`` builds an agent over the trainer's own base and backend: the
    untrained base as ``agent(BASE, REFERENCE)``, each trained adapter as ``agent(name, name)``.
    With a time budget the run calls :meth:`measure_base` before its first step (the untrained
    base never changes): its measured time is what the budget reserves (:meth:`reserve`), and
    :meth:`finish` then samples only the adapters. Problem sample seed 0 whatever the run's
    seed: runs of one task are checked on the same problems."""

    run_dir: Path
    env_id: str
    task_kwargs: Mapping[str, JSONValue]
    agent: Callable[[str, str], Agent]
    adapters: Sequence[str]
    problems: int
    """Test problems planned (:meth:`finish` may be told fewer)."""
    base: BaseCheck | None = None
    """The base's half, once :meth:`measure_base` ran."""
    env_options: Mapping[str, JSONValue] = field(default_factory=dict)
    """The run's env keywords (``ResolvedRun.reader_options``): the check plays the run's env."""

    def policies(self) -> Policies:
        agents = {n: self.agent(n, n) for n in self.adapters}
        return heldout_policies(str(self.run_dir), self.agent(BASE, REFERENCE), agents, self.env_options)

    def measure_base(self) -> str | None:
        """Sample the base's half now; why there is no check (one line), or None."""
        try:
            self.base = heldout_base(self.env_id, self.task_kwargs, self.policies(), self.problems)
        except NoHeldout as exc:
            return str(exc)
        return None

    @property
    def planned(self) -> int:
        """The problems the check will ask (fewer than ``problems`` when the task has fewer)."""
        return len(self.base.data.test.indices) if self.base is not None else self.problems

    def reserve(self) -> float:
        """Seconds the adapters' half will take: each adapter answers the problems the base
        answered, in calls of the same shape, so each costs the base's *measured* sampling time
        (0 before :meth:`measure_base`: nothing measured, nothing reserved)."""
        return float(self.base.report["seconds"]) * len(self.adapters) if self.base is not None else 0.0

    def finish(self, problems: int | None = None) -> JSONRecord | None:
        """The check on the first ``problems`` (default: all planned): ``heldout.json`` written and
        the table printed; ``None`` (and one line) when the env has no held-out problems."""
        problems = self.planned if problems is None else problems
        base = self.base.first(problems) if self.base is not None else None
        try:
            result = heldout_check(
                self.env_id, self.task_kwargs, self.policies(), problems, seed=0, base=base
            )
        except NoHeldout as exc:
            print(f"agon train: held-out check skipped: {exc}")
            return None
        write_heldout(result, self.run_dir)
        print_heldout(result)
        return result


def write_heldout(result: Mapping[str, JSONValue], run_dir: Path) -> Path:
    path = RunFolder(run_dir).heldout
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path


def read_heldout(run_dir: Path) -> JSONRecord | None:
    """The run's ``heldout.json`` as :func:`write_heldout` wrote it; None when the run has none."""
    path = RunFolder(run_dir).heldout
    return json.loads(path.read_text()) if path.is_file() else None


def print_heldout(result: Mapping[str, JSONValue]) -> None:
    from rich.console import Console
    from rich.table import Table

    n = len(result["problem_ids"])
    table = Table(
        title=f"held-out check: {n} test problems of {result['task']} ({result['env']}), "
        f"none in training ({result['seconds']:.0f} s)"
    )
    conf = f"{round(100 * result['confidence'])}% CI"
    for col in ("policy", "pass@1", conf, f"minus base, paired {conf}", "verdict"):
        table.add_column(col, justify="left" if col in ("policy", "verdict") else "right")
    for row in table_rows(result):
        table.add_row(*row)
    console = Console()
    Console(width=None if console.is_terminal else 120).print(table)  # a log file: no wrapped cells
    unjudged = {
        name: (row.get("score_errors", 0), row.get("score_timeouts", 0))
        for name, row in result["policies"].items()
    }
    if any(e or t for e, t in unjudged.values()):
        counts = ", ".join(f"{n}: {e} errors, {t} time-outs" for n, (e, t) in unjudged.items())
        print(f"held-out answers the verifier could not judge (left out of pass@1): {counts}")
