"""``agon study SUB``: one row of :data:`SUBCOMMANDS` per subcommand, each a dataclass parsed by tyro
(``agon study --help`` lists them all, generated from that table).

    agon study register studies/smoke.yaml --out runs/smoke     # freeze the plan first
    agon study run studies/smoke.yaml --out runs/smoke --workers 2
    agon study report runs/smoke                                 # results.json, report.md, figure
    agon study verify runs/smoke/results.json

``run`` resumes: the same command continues a killed study from each unit's last checkpoint.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import tyro

from agon_env.command import CommandArgs, dispatch, run_command, table_usage
from agon_env.config import ConfigError
from agon_env.league.commands.league import StudyLeagueArgs, run_study_league
from agon_env.run_folder import check_file_writable, check_writable
from agon_env.study.folder import StudyFolder
from agon_env.study.results_file import ResultsDocument, read_results, write_results

if TYPE_CHECKING:
    from agon_env.study.plan import StudyPlan

Plan = Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="PLAN")]


@dataclass
class RegisterArgs(CommandArgs):
    """Freeze a study plan before any result exists: its content hash, the prompts' fingerprint,
    the package version and git commit, the time (OUT/registration.json). Prints what to commit."""

    plan: Plan = ""
    """The study plan (a YAML file, e.g. studies/smoke.yaml)."""
    out: str = ""
    """The study folder the plan is registered in (``run`` uses the same)."""
    print_plan: bool = False
    """Print the plan as it resolves (every field, defaults included) and exit."""
    base_rate: float | None = None
    """The pass@1 both arms are expected near, for the detectable difference (None: the middle of
    the calibration band, else 50 %, the worst case)."""


@dataclass
class RunArgs(CommandArgs):
    """Run a study's units (arm × seed: train, then evaluate; the base; a calibration) and report.
    The same command resumes a killed study from each unit's last checkpoint; a unit is never run
    twice at once. A registered folder refuses a changed plan."""

    plan: Plan = ""
    """The study plan (a YAML file, e.g. studies/smoke.yaml)."""
    out: str = ""
    """The study folder (created; re-running continues in it)."""
    workers: int = 1
    """Units run at once on this machine (``--launcher local``), each with its plan's threads."""
    devices: list[str] = field(default_factory=list)
    """Devices the workers take in turn, e.g. ``cuda:0 cuda:1`` (none: each unit's config decides)."""
    launcher: str = "local"
    """``local`` (``--workers`` processes here) or ``ray`` (each unit a Ray task; pip install
    'agon-env[study-ray]')."""
    ray_address: str | None = None
    """``--launcher ray``: the cluster (None: start a local one; ``auto``: the running one)."""
    cpus_per_unit: float = 1
    """``--launcher ray``: CPUs each unit's task asks for."""
    gpus_per_unit: float = 0
    """``--launcher ray``: GPUs each unit's task asks for (1: one GPU per unit)."""
    processes_per_unit: int = 1
    """Training processes per unit: more than 1 makes each unit data-parallel (``torchrun
    --standalone``, docs/scaling.md), e.g. 8 with ``--gpus-per-unit 8``."""
    report_to: list[str] = field(default_factory=list)
    """Trackers every trained unit reports to, e.g. ``wandb``: a study's units are one wandb group
    (job type: the arm; trackio: one project), and the study's summary is logged when it ends."""
    retries: int = 0
    """Run a failed unit again up to this many times (the others run on either way)."""
    report: bool = True
    """Write results.json, report.md and the figure when the units end (``--no-report``: don't)."""
    print_plan: bool = False
    """Print the plan as it resolves (every field, defaults included) and exit."""


@dataclass
class ReportArgs(CommandArgs):
    """Write a study's results.json (every outcome list, unit settings, verifier failures, hashes),
    report.md (tables with intervals, verdicts) and its figure; or re-render a results file."""

    study: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DIR_OR_RESULTS")] = ""
    """A study folder (reads its finished units), or a results .json file (re-renders it)."""
    compare: list[str] = field(default_factory=list)
    """Comparisons to add, e.g. ``'agon - coop'``: reported as exploratory (not in the plan)."""
    results: str | None = None
    """Also write the results file here (e.g. docs/results/my_study.json)."""
    docs: str | None = None
    """Regenerate the generated block ``--block`` of this Markdown file (and its figure)."""
    block: str = "study"
    """The block's name: the Markdown between ``<!-- BLOCK:begin -->`` and ``<!-- BLOCK:end -->``."""


@dataclass
class VerifyArgs(CommandArgs):
    """Recompute a results file's summary from its outcome lists and bind it to what was frozen
    outside it (the study folder's registration and units, a published fingerprint, its report);
    any mismatch fails (exit 2) with one line naming what disagrees."""

    results: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RESULTS")] = ""
    """A study's results.json."""
    study: str | None = None
    """The study folder whose registration.json and units' records the results must match (None: the
    results file's own folder, when it holds a registration.json)."""
    fingerprint: str | None = None
    """The fingerprint ``register`` printed (and you published): the results' registration must hash to it."""
    report: str | None = None
    """A report.md: it must name the results file's sha256 and be what the results render to."""


@dataclass
class DiffArgs(CommandArgs):
    """Compare two results files outcome by outcome: one line per unit, method or problem that
    differs; exit 0 when every outcome and mean length agree, 1 otherwise."""

    a: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="A")] = ""
    """A results .json (or a study folder: its results.json)."""
    b: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="B")] = ""
    """The other results .json (or a study folder)."""
    unit: list[str] = field(default_factory=list)
    """Compare these units alone, e.g. ``grpo-seed0`` (none: every unit)."""


@dataclass
class StatusArgs(CommandArgs):
    """Every unit's state (waiting, running at step k of n, evaluating, done, failed with its log's
    last line), the time so far and an estimate of what is left, read from the study folder alone
    (so it works while another process runs the study)."""

    study: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DIR")] = ""
    """The study folder (``agon study run --out DIR``)."""


@dataclass
class TransferArgs(CommandArgs):
    """Evaluate every trained unit of a study on another task (transfer) and add it to the results
    as exploratory (a ``transfer`` section, never in the summary or a verdict). Resumes: a unit
    already evaluated there is skipped."""

    study: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DIR")] = ""
    """The study folder (``agon study run --out DIR``)."""
    env: str = ""
    """The other task's registered env id, e.g. ``agon/gsm8k-v0``."""
    env_kwarg: list[str] = field(default_factory=list)
    """Its task keywords, ``KEY=VALUE`` (YAML values), e.g. ``difficulty=3``."""
    split: str = "test"
    """Which of its splits (``test``, or ``validation``)."""
    problems: int | None = None
    """Problems per unit (None: the plan's ``evaluation.test_problems``)."""
    workers: int = 1
    """Units evaluated at once on this machine."""


def _required(value: str, what: str) -> str:
    if not value:
        raise ConfigError(f"give {what}")
    return value


def _load(plan_path: str, print_plan: bool, base_rate: float | None = None) -> StudyPlan:
    from agon_env.study.plan import check, load
    from agon_env.study.registration import describe, detectable

    plan = load(_required(plan_path, "a study plan, e.g. studies/smoke.yaml"))
    configs = check(plan)
    if print_plan:
        print(plan.yaml(), end="")
        for arm, cfg in configs.items():
            print(f"# {arm}: algo {cfg.algo}, {cfg.steps} steps, seeds {plan.seeds}")
        print(f"# {describe(detectable(plan, base_rate))}")
    return plan


def register(args: RegisterArgs) -> int:
    from agon_env.study.registration import REGISTRATION, describe
    from agon_env.study.registration import register as freeze

    plan = _load(args.plan, args.print_plan, args.base_rate)
    if args.print_plan:
        return 0
    out = Path(_required(args.out, "--out DIR, the study folder"))
    check_writable(out, "--out")
    reg, new = freeze(plan, out, Path(args.plan), args.base_rate)
    commit = reg.git_commit or "none (the plan is in no git repository)"
    print(
        f"{'registered' if new else 'already registered'}: {args.plan} (sha256 {reg.plan_sha256[:16]}, "
        f"prompts {reg.prompts}, agon-env {reg.document.get('package_version')}, study commit {commit}, "
        f"{reg.registered_at})"
    )
    if reg.detectable:
        print(f"{', '.join(plan.comparisons) or 'no primary comparison'}: {describe(reg.detectable)}")
    if reg.fingerprint:  # registrations before it hold none
        print(f"fingerprint: {reg.fingerprint}")
        print("publish it before running: agon study verify RESULTS --fingerprint SHA checks against it")
    if reg.git_commit:  # outside a repository there is nothing to commit it to
        print(
            f"commit before running: git add {args.plan} {out / REGISTRATION} "
            f"&& git commit -m 'register {plan.name}'"
        )
    return 0


def run(args: RunArgs, argv: Sequence[str]) -> int:
    from agon_env.study import registration
    from agon_env.study.calibration import calibrate
    from agon_env.study.launchers import LAUNCHERS, say
    from agon_env.study.units import arm_unit, base_unit, write_specs

    plan = _load(args.plan, args.print_plan)
    if args.print_plan:
        return 0
    if args.launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher {args.launcher!r}: choose from {', '.join(LAUNCHERS)}")
    if args.report_to:
        from agon_env.algorithms.trackers import refusal

        if why := refusal(args.report_to):
            raise ConfigError(f"--report-to: {why}")
    out = Path(_required(args.out, "--out DIR, the study folder")).resolve()
    check_writable(out, "--out")  # before any unit is calibrated, trained or evaluated
    reg = registration.check(plan, out)
    if reg is None:
        registration.admissible(plan)  # what register would refuse is not run unregistered either
        say(
            f"{out} has no registration: every comparison will be reported as exploratory "
            f"(agon study register {args.plan} --out {args.out} first to fix them)"
        )
    registration.claim(plan, out)
    folder = StudyFolder(out)
    if args.launcher == "ray":
        launch = partial(
            LAUNCHERS["ray"],
            logs=folder.logs,
            address=args.ray_address,
            cpus_per_unit=args.cpus_per_unit,
            gpus_per_unit=args.gpus_per_unit,
        )
    else:
        launch = partial(LAUNCHERS["local"], logs=folder.logs, workers=args.workers, devices=args.devices)
    task = calibrate(plan, out, launch, say).task
    units = [base_unit(plan, out, task)] if plan.evaluation.base_methods else []
    units += [arm_unit(plan, out, arm, seed, task) for seed in plan.seeds for arm in plan.arms]
    for u in units:
        u.processes = args.processes_per_unit if u.train is not None else 1
        if args.report_to and u.config is not None:
            u.config["report_to"] = list(args.report_to)
    todo = [u for u in units if not u.done()]
    say(f"{len(units) - len(todo)} of {len(units)} units done; running {len(todo)}")
    failed = launch(write_specs(out, todo)) if todo else {}
    for attempt in range(1, args.retries + 1):
        if not failed:
            break
        say(f"retrying {', '.join(failed)} (try {attempt + 1} of {args.retries + 1})")
        failed = launch(write_specs(out, [u for u in todo if u.name in failed]))
    folder.write_failed({name: (tail.strip().splitlines() or [""])[-1] for name, tail in failed.items()})
    for name, tail in failed.items():
        print(f"--- {name} failed; the end of its log:\n{tail}", file=sys.stderr)
    if args.report:
        doc = _report(out, [], None, None, "study", f"agon study run {' '.join(argv)}")
        from agon_env.study.tracking import log_summary

        log_summary(doc, out, args.report_to)
    return 1 if failed else 0


def _report(
    study: Path, compare: list[str], results: str | None, docs: str | None, block: str, command: str
) -> ResultsDocument:
    from agon_env.study import tables
    from agon_env.study.analysis import summary_from_outcomes
    from agon_env.study.plan import load, split
    from agon_env.study.registration import read, refuse_another_plan
    from agon_env.study.results import build

    for flag, path in (("--results", results), ("--docs", docs)):
        if path is not None:  # checked by writing, before the study is read
            check_file_writable(path, flag)
    added = [split(c) for c in compare]
    if study.suffix == ".json":
        from agon_env.study.binding import bind, folder_of

        if folder_of(study, None) is not None:  # beside its registration: never render it unbound
            bind(study)
        else:
            print(
                f"agon study report: {study} is rendered unbound (no study folder beside it); "
                "agon study verify binds it",
                file=sys.stderr,
            )
        doc = read_results(study).document
        if added:
            arms = doc["outcomes"]["arms"]
            for pair in added:
                unknown = [a for a in pair if a not in arms]
                if unknown:
                    raise ConfigError(
                        f"--compare {' - '.join(pair)}: {unknown[0]!r} is not an arm of {study}"
                    )
            doc["added_comparisons"] = [*doc.get("added_comparisons", []), *map(list, added)]
        # from the outcome lists under the registered rule: never a summary the file changed alone
        doc["summary"] = summary_from_outcomes(doc)
        label = results or str(study)
    else:
        folder = StudyFolder(study).require()
        plan = load(folder.plan)
        reg = read(study)
        refuse_another_plan(reg, plan, study, str(folder.plan), "a report reads the plan its units ran under")
        unknown = [a for pair in added for a in pair if a not in plan.arms]
        if unknown:
            raise ConfigError(f"--compare: {unknown[0]!r} is not an arm of the plan ({', '.join(plan.arms)})")
        try:
            doc = build(plan, study, command, reg, added)
        except (ConfigError, ImportError) as exc:
            # The units' task or plugins do not import here (another folder, another machine): the
            # results file holds every outcome, so the report is rendered from it alone.
            if not (folder.results).is_file():
                raise
            print(f"agon study report: {exc}; rendering {folder.results} as recorded", file=sys.stderr)
            doc = read_results(folder.results).document
            if added:
                doc["added_comparisons"] = [*doc.get("added_comparisons", []), *map(list, added)]
            doc["summary"] = summary_from_outcomes(doc)
        else:
            from agon_env.study.transfer import TRANSFER, sections

            if transferred := sections(plan, study):  # `agon study eval`'s exploratory section, kept
                doc[TRANSFER] = transferred
            write_results(doc, folder.results)
        label = results or _shown(folder.results)
        print(tables.write(doc, study, label))
        from agon_env.study.binding import seal

        if (folder.results).is_file():
            seal(folder.report, folder.results)
    if results is not None:
        write_results(doc, Path(results))
    if docs is not None:
        print(tables.regenerate(doc, Path(docs), block, label))
    elif study.suffix == ".json":
        print(tables.markdown(doc, block, label))
    return doc


def _shown(path: Path) -> str:
    """``path`` as the report names it: from the current folder when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def report(args: ReportArgs, argv: Sequence[str]) -> int:
    study = Path(_required(args.study, "a study folder or a results .json"))
    _report(study, args.compare, args.results, args.docs, args.block, f"agon study report {' '.join(argv)}")
    return 0


def verify(args: VerifyArgs) -> int:
    from agon_env.study.binding import bind

    path = Path(_required(args.results, "a results file, e.g. runs/smoke/results.json"))
    doc, bound = bind(path, args.study, args.fingerprint, args.report)
    arms = doc["outcomes"]["arms"]
    units = sum(len(seeds) for seeds in arms.values()) + bool(doc["outcomes"].get("base"))
    print(
        f"{path}: the summary recomputes from the outcome lists ({units} units, "
        f"{len(doc['problems']['test']['ids'])} test problems, "
        f"{len(doc['summary']['paired'])} paired differences); {bound}"
    )
    return 0


def diff(args: DiffArgs) -> int:
    from agon_env.study.diff import differences, render

    docs = [read_results(_required(given, "two results files A B")).document for given in (args.a, args.b)]
    lines = differences(*docs, only=args.unit)
    print(render(lines) if lines else f"{args.a} and {args.b}: every outcome and mean length agree")
    return 1 if lines else 0


def status(args: StatusArgs) -> int:
    from agon_env.study.status import render, states

    study = Path(_required(args.study, "a study folder"))
    print(render(study, states(study)))
    return 0


def transfer(args: TransferArgs) -> int:
    from agon_env.config import parse_assignments
    from agon_env.study.launchers import LAUNCHERS, say
    from agon_env.study.plan import load
    from agon_env.study.results import plan_record
    from agon_env.study.transfer import TRANSFER, sections, slug, table, units
    from agon_env.study.units import write_specs

    study = Path(_required(args.study, "a study folder")).resolve()
    folder = StudyFolder(study).require()
    plan = load(folder.plan)
    env_id = _required(args.env, "--env ID, the task to evaluate on (e.g. agon/gsm8k-v0)")
    kwargs = parse_assignments(args.env_kwarg, "--env-kwarg")
    found = units(plan, study, env_id, kwargs, args.split, args.problems)
    todo = [u for u in found if not u.done()]
    say(f"{len(found) - len(todo)} of {len(found)} trained units evaluated on {env_id}; running {len(todo)}")
    failed = (
        LAUNCHERS["local"](write_specs(study, todo), logs=folder.logs, workers=args.workers) if todo else {}
    )
    for name, tail in failed.items():
        print(f"--- {name} failed; the end of its log:\n{tail}", file=sys.stderr)
    done = sections(plan, study)
    results = folder.results
    if results.is_file():  # the study's results gain the section; its summary is untouched
        from agon_env.study import tables
        from agon_env.study.binding import seal

        doc = read_results(results).document
        doc[TRANSFER] = done
        write_results(doc, results)
        # report.md is sealed to the results' sha256: rendered again, or `verify --report` fails on it
        tables.write(doc, study, _shown(results))
        seal(folder.report, results)
    name = slug(env_id, kwargs, args.split)
    if name in done:
        print(table(name, done[name], plan_record(plan)))
    return 1 if failed else 0


SUBCOMMANDS: dict[str, tuple[type[CommandArgs], Callable[..., int], str]] = {
    "register": (
        RegisterArgs,
        lambda a, argv: register(a),
        "freeze a plan before its results (hashes, version, time)",
    ),
    "run": (RunArgs, run, "run and resume a study's units (arm × seed: train, then evaluate), then report"),
    "report": (
        ReportArgs,
        report,
        "results.json, report.md and the figure of a study (or re-render a results file)",
    ),
    "verify": (
        VerifyArgs,
        lambda a, argv: verify(a),
        "recompute a results file's summary from its outcome lists",
    ),
    "status": (StatusArgs, lambda a, argv: status(a), "where each unit of a study stands, and the time left"),
    "eval": (TransferArgs, lambda a, argv: transfer(a), "evaluate a study's trained units on another task"),
    "diff": (DiffArgs, lambda a, argv: diff(a), "compare two results files outcome by outcome"),
    "league": (
        StudyLeagueArgs,
        lambda a, argv: run_study_league(a),
        "cross-play between the units' snapshots (agon league over the study's runs)",
    ),
}
"""``agon study SUB`` -> (its options, what runs them, one-line help)."""


def usage() -> str:
    return table_usage(
        "agon study", "An ablation across arms and seeds, fixed before its results.", SUBCOMMANDS
    )


def _start(name: str, rest: list[str]) -> int:
    cls, fn, _ = SUBCOMMANDS[name]
    return run_command(cls, rest, f"agon study {name}", lambda args: fn(args, rest))


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch("agon study", sys.argv[1:] if argv is None else argv, SUBCOMMANDS, usage(), _start)
