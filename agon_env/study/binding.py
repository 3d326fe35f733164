"""``agon study verify RESULTS [--study DIR] [--fingerprint SHA] [--report FILE]``: a results file
bound to what was frozen outside it.

A results file carries a copy of its registration, so on its own it can only be self-consistent
(:func:`agon_env.study.verify.verify`: its summary recomputes from its outcome lists, its copy of
the registration hashes to what it says). Here it is checked against what it cannot rewrite:

- the study folder's ``registration.json`` (``--study DIR``; the results file's own folder when it
  holds one): the same registration, its anchor hashing to its fingerprint, and the results' test
  problems the registered ones (ids *and* prompt hashes);
- each unit's own records there (:mod:`agon_env.study.records`): ``unit.json`` with its start and
  write times, the ``eval.json`` it hashed (whose outcome lists must be the results'), the adapters
  it hashed, and ``units/NAME.started``; the registration must predate the first unit's start;
- a published fingerprint (``--fingerprint SHA``, :mod:`agon_env.study.anchor`): the results'
  registration must hash to it;
- the report (``--report FILE``): its last line names the results file's sha256, and the rest is
  what the results file renders to.

Every test problem is re-derived from the results' task and its id, and its prompt hash compared.
Each check fails with one line naming what disagrees (the first; the count of the rest follows).
A results file checked against nothing is "self-consistent, not bound"; one recorded before
registrations existed says so ("the older rules").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from agon_env.errors import UserError
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.run_folder import EVAL_REPORT
from agon_env.study.anchor import fingerprint, level_key, rederive
from agon_env.study.diff import units
from agon_env.study.folder import REGISTRATION, UNIT_RECORD, StudyFolder
from agon_env.study.records import adapter_hashes, file_sha256
from agon_env.study.registration import read
from agon_env.study.results_file import ResultsDocument, results_path
from agon_env.study.verify import VerifyError, verify

SEAL = "Results file sha256: "
"""How report.md's last line starts: the sha256 of the results file it was rendered from."""

TIMES = ("started_at", "written_at")
"""What every unit records, in its ``unit.json`` and in the results file (a missing one fails)."""


def seal(report: Path, results: Path) -> None:
    """End ``report`` with the sha256 of ``results`` (what ``verify --report`` checks)."""
    from agon_env.evaluation.report import write_text_atomic

    text = report.read_text().rstrip("\n")
    write_text_atomic(report, f"{text}\n\n{SEAL}{file_sha256(results)}\n")


def short(value: JSONValue) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def first_difference(mine: JSONValue, theirs: JSONValue, path: str, names: tuple[str, str]) -> str | None:
    """The first place ``mine`` (the results') and ``theirs`` (``names[1]``'s) differ, as one line
    (``plan.decision.confidence: results 0.9, registration 0.95``); None when equal."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for k in sorted(set(mine) | set(theirs), key=str):
            if k not in mine or k not in theirs:
                where = names[0] if k not in mine else names[1]
                return f"{path}.{k}: missing in the {where}"
            if found := first_difference(mine[k], theirs[k], f"{path}.{k}", names):
                return found
        return None
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        pairs = zip(mine, theirs, strict=True)
        return next(
            (d for i, (a, b) in enumerate(pairs) if (d := first_difference(a, b, f"{path}[{i}]", names))),
            None,
        )
    if mine == theirs:
        return None
    return f"{path}: {names[0]} {short(mine)}, {names[1]} {short(theirs)}"


def task_of(doc: ResultsDocument) -> tuple[str, JSONRecord]:
    """The env id and task keywords every unit of ``doc`` evaluated (today's layout, or the
    recorded studies' ``{"env": ..., "difficulty": ...}``)."""
    task = doc["task"]
    kwargs = task.get("kwargs")
    return task["env"], dict(kwargs) if kwargs is not None else {k: v for k, v in task.items() if k != "env"}


def rederived(doc: ResultsDocument) -> tuple[list[str], str]:
    """Every test problem drawn again from the results' task and compared with its id and prompt
    hash: (mismatches, what to say when there are none)."""
    env_id, kwargs = task_of(doc)
    plan = doc["plan"]
    try:
        again = rederive(env_id, kwargs, plan["test_problems"], plan["val_problems"])
    except (UserError, ImportError, KeyError, ValueError, OSError) as exc:
        return [], f"its test problems are not re-derived here ({str(exc).splitlines()[0]})"
    test = doc["problems"]["test"]
    found = first_difference(test, again, "problems.test", ("results", "re-derived"))
    return [found] if found else [], f"its {len(test['ids'])} test problems re-derive"


def registered(doc: ResultsDocument) -> JSONRecord | None:
    return doc.get("registration") or None


def own_times(doc: ResultsDocument, reg: JSONRecord) -> list[str]:
    """The results' own unit times (every unit has both) and the registration before each start."""
    wrong = []
    for name, rec in units(doc).items():
        wrong += [f"outcomes.{name}.{key}: missing" for key in TIMES if not rec.get(key)]
    starts = sorted((rec["started_at"], name) for name, rec in units(doc).items() if rec.get("started_at"))
    # times are to the second: a registration in the same second as the first start is not after it
    if starts and reg.get("registered_at", "~") > starts[0][0]:
        when, name = starts[0]
        wrong.append(
            f"registration.registered_at: {reg.get('registered_at')} is after the first unit's start "
            f"({name}, {when})"
        )
    return wrong


def against_anchor(doc: ResultsDocument, reg: JSONRecord, where: str) -> list[str]:
    """``reg`` (``where``: whose) is whole: its anchor hashes to its fingerprint and holds its plan's
    hash, and the results' test problems are those it registered for their task level."""
    frozen = reg.get("anchor")
    if not frozen:
        return [f"{where}.anchor: missing (registered before fingerprints)"]
    wrong = []
    if fingerprint(frozen) != reg.get("fingerprint"):
        wrong.append(
            f"{where}.fingerprint: {short(reg.get('fingerprint'))}, "
            f"its anchor hashes to {fingerprint(frozen)}"
        )
    if frozen.get("plan_sha256") != reg.get("plan_sha256"):
        wrong.append(
            f"{where}.anchor.plan_sha256: {short(frozen.get('plan_sha256'))}, "
            f"the plan's {short(reg.get('plan_sha256'))}"
        )
    level = level_key(doc.get("calibration", {}).get("task") or {})
    want = frozen.get("problems", {}).get(level)
    found = first_difference(doc["problems"]["test"], want, "problems.test", ("results", "registration"))
    return wrong + ([found] if found else [])


def against_folder(doc: ResultsDocument, study: Path) -> list[str]:
    """The results against ``study``'s registration.json."""
    reg = read(study)
    if reg is None:
        return [f"{study / REGISTRATION}: missing"]
    names = ("results", "registration")
    found = first_difference((doc.get("plan") or {}).get("study"), reg.plan, "plan", names)
    found = found or first_difference(registered(doc), reg.document, "registration", names)
    return [found] if found else []


def unit_outcomes(eval_json: Path, ids: list[str]) -> JSONRecord:
    """A unit's outcome lists as its ``eval.json`` gives them (what the results file should hold)."""
    from agon_env.evaluation.report_file import read_eval_report
    from agon_env.study.results import unit_record

    record = unit_record(read_eval_report(eval_json), ids, eval_json.parent)
    return {k: record[k] for k in ("outcomes", "first_outcomes")}


def against_units(doc: ResultsDocument, study: Path, reg: JSONRecord) -> list[str]:
    """Every unit of the results against its own records in ``study`` (:mod:`records`)."""
    folder_ = StudyFolder(study)
    ids, wrong = doc["problems"]["test"]["ids"], []
    for name, rec in units(doc).items():
        folder = folder_.eval_dir(name)
        stamp = folder_.read_unit_record(name)
        if stamp is None:
            wrong.append(f"eval/{name}/{UNIT_RECORD}: missing")
            continue
        held = {
            "started_at": stamp.started_at,
            "written_at": stamp.written_at,
            "eval_sha256": stamp.eval_sha256,
        }
        wrong += [f"eval/{name}/{UNIT_RECORD}.{k}: missing" for k, v in held.items() if not v]
        for key in TIMES:
            if rec.get(key) != held[key]:
                said = "missing" if not rec.get(key) else f"results {rec.get(key)}, {UNIT_RECORD} {held[key]}"
                wrong.append(f"outcomes.{name}.{key}: {said}")
        start = folder_.started(name)
        if not start.is_file() or start.read_text().strip() != stamp.started_at:
            wrong.append(
                f"units/{start.name}: "
                + ("missing" if not start.is_file() else f"not the start {UNIT_RECORD} records")
            )
        report = folder / EVAL_REPORT
        if not report.is_file() or file_sha256(report) != stamp.eval_sha256:
            wrong.append(
                f"eval/{name}/{EVAL_REPORT}: "
                + ("missing" if not report.is_file() else f"not the file {UNIT_RECORD} hashed")
            )
            continue
        mine = {k: rec.get(k) for k in ("outcomes", "first_outcomes")}
        found = first_difference(
            mine, unit_outcomes(report, ids), f"outcomes.{name}", ("results", "eval.json")
        )
        wrong += [found] if found else []
        if name != "base" and not stamp.adapters:
            wrong.append(f"eval/{name}/{UNIT_RECORD}.adapters: missing")
        elif name != "base" and adapter_hashes(folder_.run(name).path) != stamp.adapters:
            wrong.append(f"runs/{name}/adapters: not the files {UNIT_RECORD} hashed")
    starts = [(s.started_at or "", n) for n in units(doc) if (s := folder_.read_unit_record(n))]
    first = min(starts, default=None)
    if first and first[0] and reg.get("registered_at", "~") > first[0]:
        wrong.append(
            f"{REGISTRATION}.registered_at: {reg.get('registered_at')} is after the first unit's start "
            f"({first[1]}, {first[0]})"
        )
    return wrong


def against_report(doc: ResultsDocument, results: Path, report: Path) -> list[str]:
    """``report`` ends with ``results``' sha256 and is, line for line, what ``doc`` renders to."""
    from agon_env.study.tables import report_markdown

    lines = report.read_text().rstrip("\n").split("\n")
    if not lines[-1].startswith(SEAL):
        return [f"{report.name}: no '{SEAL.strip()}' line at its end"]
    if (sha := lines[-1][len(SEAL) :].strip()) != file_sha256(results):
        return [f"{report.name}: results sha256 {sha[:16]}, the results file's {file_sha256(results)[:16]}"]
    label = re.match(r"Generated by `agon study report` from `(.*?)`", lines[0])
    if label is None:
        return [f"{report.name}: line 1 is not a report's first line"]
    rendered = report_markdown(doc, label.group(1)).rstrip("\n").split("\n")
    body = lines[:-1]
    while body and not body[-1]:
        body.pop()
    for i, (said, want) in enumerate(zip(body, rendered, strict=False), start=1):
        if said != want:
            at = next((j for j, (a, b) in enumerate(zip(said, want, strict=False)) if a != b), len(want))
            part = slice(max(0, at - 8), at + 32)  # where they part, not the shared start
            return [f"{report.name} line {i}: '…{said[part]}…', the results render '…{want[part]}…'"]
    return (
        []
        if len(body) == len(rendered)
        else [f"{report.name}: {len(body)} lines, the results render {len(rendered)}"]
    )


def folder_of(results: Path, study: str | None) -> Path | None:
    """The study folder to bind to: ``study``, else the results file's own when it is one."""
    if study:
        return Path(study)
    here = results.parent
    return here if (here / REGISTRATION).is_file() else None


def fail(path: Path, wrong: list[str]) -> None:
    more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
    raise VerifyError(f"{path}: {wrong[0]}{more}")


def bind(
    given: str | Path, study: str | None = None, published: str | None = None, report: str | None = None
) -> tuple[JSONRecord, str]:
    """The results document at ``given`` and what it is bound to, in words; a :class:`VerifyError`
    naming the first thing that disagrees otherwise."""
    path = results_path(given)
    doc = verify(path)  # self-consistent first: its summary recomputes, its copy of the registration holds
    folder = folder_of(path, study)
    wrong, problems = rederived(doc)
    reg = registered(doc)
    # a registration before fingerprints (the older rules) holds no anchor and its units no times
    old = reg is not None and not reg.get("anchor")
    checks: list[Callable[[], list[str]]] = []
    if reg is None and (folder is not None or published):
        checks.append(lambda: ["registration: none in the results file"])
    if reg is not None and not old:
        checks += [lambda: against_anchor(doc, reg, "registration"), lambda: own_times(doc, reg)]
    if published and reg is not None and fingerprint(reg.get("anchor") or {}) != published:
        held = "has none (the older rules)" if old else f"hashes to {fingerprint(reg['anchor'])}"
        checks.append(lambda: [f"fingerprint: given {published}, the results' registration {held}"])
    if folder is not None:
        checks.append(lambda: against_folder(doc, folder))
        if not old:
            checks.append(lambda: against_units(doc, folder, held.document if (held := read(folder)) else {}))
    if report:
        checks.append(lambda: against_report(doc, path, Path(report)))
    for check in checks:
        wrong += check()
        if wrong:
            fail(path, wrong)
    if wrong:
        fail(path, wrong)
    words = said(doc, folder, published, problems)
    return doc, words + (
        f"; {Path(report).name} names this file's sha256 and renders from it" if report else ""
    )


def said(doc: ResultsDocument, folder: Path | None, published: str | None, problems: str) -> str:
    """What a results file that passed :func:`bind` is bound to, in one line."""
    reg = registered(doc)
    if "registration" not in doc:
        return f"recorded without a registration (the older rules): self-consistent, not bound; {problems}"
    if reg is None:
        return f"not registered (every comparison exploratory): self-consistent, not bound; {problems}"
    if not reg.get("anchor"):
        same = f", the same as {folder / REGISTRATION}" if folder is not None else ""
        return (
            f"registered without a fingerprint (the older rules{same}; its units' records not checked): "
            f"self-consistent, not bound; {problems}"
        )
    if folder is None and not published:
        return (
            f"self-consistent, not bound (no study folder, no --fingerprint: give either to bind it to its "
            f"registration of {reg.get('registered_at')}); {problems}"
        )
    bound = [f"the fingerprint given ({published[:16]})"] if published else []
    if folder is not None:
        bound.append(f"{folder / REGISTRATION} of {reg.get('registered_at')} and its units' own records")
    return f"bound to {' and '.join(bound)}; {problems}"
