"""Pre-registration, and a study folder's identity: a plan frozen in its study folder before any
unit runs, and the one place that decides whether a folder is a plan's.

A study's identity (:func:`identity`) is its plan's content hash, its preset's content hash and the
prompts' fingerprint. ``agon study run`` claims a folder for it (:func:`claim`: ``plan.yaml`` and
``study.json``), checks it against the folder's registration (:func:`check`), and ``register``
(:func:`register`) and ``report`` refuse a folder of another plan (:func:`refuse_another_plan`).

``registration.json`` holds the plan's content hash and the plan itself, its preset's content
hash, the prompts' fingerprint, the package version and its checkout's commit, the commit of the
study's own repository (the one holding the plan file, when there is one) and the time.
``agon study run`` refuses a plan whose hash differs or an edited preset; the report marks every comparison
the registration does not hold as exploratory, and every unit's results carry the time they
were written, so "registered before results" is checkable from the files alone.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

from agon_env.config import ConfigError
from agon_env.json_value import JSONRecord
from agon_env.study.anchor import FINGERPRINTED, anchor, fingerprint, task_modules
from agon_env.study.folder import REGISTRATION, Registration, StudyFolder, StudyStart
from agon_env.study.plan import StudyPlan
from agon_env.upgrade import registered


def prompts_fingerprint() -> str:
    """A hash of everything a unit's model reads besides the problem: the :data:`FINGERPRINTED`
    families' system messages and worked examples and the exchange wording (torch-free imports)."""
    from agon_env.agents.prompts import PROMPT_FAMILIES
    from agon_env.vocabulary import challenger_text

    read = sorted((k, PROMPT_FAMILIES[k]) for k in FINGERPRINTED)
    text = repr(read) + challenger_text("Q", "D") + challenger_text("Q", "D", own=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def git_commit(where: Path | None = None) -> str | None:
    """The commit of the git repository holding ``where`` (default: the checkout this package runs
    from), ``+dirty`` with uncommitted changes to tracked files, or None outside any repository."""
    root = Path(__file__).resolve().parents[2] if where is None else where.resolve()
    root = root if root.is_dir() else root.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    status = ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"]
    dirty = subprocess.run(status, capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    return (out.stdout.strip() + ("+dirty" if dirty else "")) if out.returncode == 0 else None


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def preset_sha256(plan: StudyPlan) -> str | None:
    """The content hash of the plan's ``config:`` preset: the plan holds its name alone, so an edit
    to the file would otherwise change every unit still to run without changing the plan."""
    from agon_env.config import preset_path

    if not plan.config:
        return None
    path = preset_path(plan.config)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def base_rate(plan: StudyPlan, stated: float | None = None) -> tuple[float, str]:
    """The pass@1 both arms are expected near, and where it comes from: ``stated`` (a flag), else
    the middle of the calibration band, else 50 % (the worst case: the most discordant pairs)."""
    if stated is not None:
        if not 0 < stated < 1:
            raise ConfigError(f"--base-rate: {stated:g} is no pass@1; give one in (0, 1), e.g. 0.3")
        return stated, "stated"
    if plan.calibration is not None:
        return sum(plan.calibration.band) / 2, "the middle of the calibration band"
    return 0.5, "none stated: 50 %, the worst case"


def detectable(plan: StudyPlan, stated: float | None = None) -> JSONRecord:
    """The smallest difference each primary comparison's registered rule detects with 80 % power
    at the plan's seeds × test problems, confidence and every-seed clause, from :func:`base_rate`:
    simulated (:func:`agon_env.study.power.statement`), the same for every comparison, since each
    pairs every seed and problem. 1.0 when no possible rise is detected that often."""
    from agon_env.study import power

    rate, source = base_rate(plan, stated)
    seeds, problems, decided = len(plan.seeds), plan.evaluation.test_problems, plan.decision
    design = power.Design(seeds, problems, rate, decided.confidence, decided.every_seed)
    return {
        "base_rate": rate,
        "base_rate_source": source,
        "power": power.POWER,
        "confidence": decided.confidence,
        "seeds": seeds,
        "problems": problems,
        "pairs": seeds * problems,
        **power.statement(design),
        "comparisons": list(plan.comparisons),
    }


def check_margin(plan: StudyPlan, power: JSONRecord) -> None:
    """Refuse an equivalence margin the plan cannot resolve: below its detectable difference, an
    interval inside ±margin is not to be expected at the planned size."""
    margin = plan.decision.equivalence_margin
    if margin is not None and margin < power["difference"]:
        raise ConfigError(
            f"decision.equivalence_margin: ±{100 * margin:g} pp is below the smallest difference this plan "
            f"can detect ({100 * power['difference']:.1f} pp at {power['pairs']} seed × problem pairs, base "
            f"rate {100 * power['base_rate']:g} %, {power.get('method', 'McNemar formula')}); widen the "
            "margin or add seeds or test problems"
        )


def admissible(plan: StudyPlan, stated: float | None = None) -> JSONRecord:
    """The plan's detectable difference when ``register`` would freeze the plan; the
    ``ConfigError`` it would refuse it with otherwise. The one home of the checks a registration
    adds to :func:`agon_env.study.plan.check`: ``run`` asks it of an unregistered study, so a plan
    ``register`` refuses is not run unregistered instead."""
    power = detectable(plan, stated)
    check_margin(plan, power)
    return power


def describe(power: JSONRecord) -> str:
    """The detectable difference in words (register, ``--print-plan`` and the report say it); a
    registration from before the simulation (no ``method``) states McNemar's formula, as it did."""
    size = f"{100 * power['power']:g} % power and {100 * power['confidence']:g} % confidence"
    base = f"base rate {100 * power['base_rate']:g} % ({power['base_rate_source']})"
    if "method" not in power:
        return (
            f"detectable difference ±{100 * power['difference']:.1f} pp at {size} over {power['pairs']} "
            f"seed × problem pairs (±{100 * power['problems_only']:.1f} pp if seeds repeat each other), "
            f"{base}"
        )
    found = (
        f"detectable difference ±{100 * power['difference']:.1f} pp"
        if power["difference"] < 1
        else "no difference detectable (not even the largest possible rise)"
    )
    return (
        f"{found} at {size} over {power['seeds']} seed{'s' * (power['seeds'] != 1)} × "
        f"{power['problems']} problems ({power['method']}), {base}"
    )


def identity(plan: StudyPlan) -> dict[str, str | None]:
    """What makes a study folder ``plan``'s: the plan's hash, its preset's and the prompts'."""
    return {
        "plan_sha256": plan.sha256(),
        "preset_sha256": preset_sha256(plan),
        "prompts": prompts_fingerprint(),
    }


def refuse_another_plan(
    reg: Registration | None, plan: StudyPlan, out: Path, subject: str, what: str
) -> None:
    """Refuse ``what`` when ``out``'s registration ``reg`` froze another plan than ``plan``
    (``subject``: where ``plan`` was read from)."""
    if reg is not None and reg.plan_sha256 != plan.sha256():
        sha, when = reg.plan_sha256[:12], reg.registered_at or "at an unknown time"
        raise ConfigError(
            f"{subject} differs from the plan registered in {out / REGISTRATION} (sha256 {sha}, "
            f"registered {when}); {what}"
        )


def claim(plan: StudyPlan, out: Path) -> None:
    """Record the plan and prompts in ``out`` the first time; refuse another plan or other prompts."""
    from agon_env.study.folder import write_text_atomic
    from agon_env.study.plan import load

    folder = StudyFolder(out)
    stored = folder.plan
    if stored.is_file() and load(stored).sha256() != plan.sha256():
        raise ConfigError(f"{out} holds a study of another plan ({stored}); use another --out or that plan")
    prompts = prompts_fingerprint()
    started = folder.read_start()
    if started is not None and started.prompts != prompts:
        raise ConfigError(
            f"{out} ran its units under other prompts ({started.prompts}, now {prompts}); use another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    if not stored.is_file():
        write_text_atomic(stored, plan.yaml())
    if started is None:
        folder.write_start(StudyStart(prompts, now()))


def record(plan: StudyPlan, source: Path | None = None, power: JSONRecord | None = None) -> JSONRecord:
    """What a registration freezes: ``git_commit`` is the commit of the study's own repository (the
    one holding the plan file ``source``; None outside one), ``package_commit`` agon-env's checkout."""
    from agon_env import __version__

    mine = identity(plan)
    frozen = anchor(plan, mine["preset_sha256"], str(mine["prompts"]))
    return {
        "plan_sha256": mine["plan_sha256"],
        "preset_sha256": mine["preset_sha256"],
        "plan": plan.as_dict(),
        "prompts": mine["prompts"],
        "package_version": __version__,
        "package_commit": git_commit(),
        "git_commit": None if source is None else git_commit(source),
        "detectable": power if power is not None else detectable(plan),
        "registered_at": now(),
        "anchor": frozen,  # what the fingerprint hashes: published, it binds results to this
        "fingerprint": fingerprint(frozen),
    }


def read(out: Path) -> Registration | None:
    return StudyFolder(out).read_registration()


def register(
    plan: StudyPlan, out: Path, source: Path | None = None, stated: float | None = None
) -> tuple[Registration, bool]:
    """Freeze ``plan`` (read from ``source``) in ``out`` (the registration, and False when it was
    already there); a folder registered with another plan is refused."""
    folder = StudyFolder(out)
    old = folder.read_registration()
    refuse_another_plan(old, plan, out, str(source or "the plan"), "a new plan needs a new --out")
    if old is not None:
        return old, False
    started = folder.any_started()  # a unit begun: its start must follow
    if started or folder.results.is_file() or folder.any_evaluated():
        raise ConfigError(
            f"{out} already holds {'started units' if started else 'results'}: a registration must "
            "come before them; use a new --out"
        )
    power = admissible(plan, stated)
    out.mkdir(parents=True, exist_ok=True)
    reg = Registration(record(plan, source, power))
    folder.write_registration(reg)
    return reg, True


def check(plan: StudyPlan, out: Path) -> Registration | None:
    """The registration in ``out`` when ``plan`` is the one it froze (None: not registered);
    a changed plan, or prompts other than the registered ones, is refused (naming what changed)."""
    reg, mine = read(out), identity(plan)
    if reg is not None and reg.plan_sha256 == mine["plan_sha256"]:
        preset = mine["preset_sha256"]
        if registered(reg.document, "preset_sha256", preset) != preset:
            raise ConfigError(
                f"the preset {plan.config} differs from the one registered in {out / REGISTRATION} "
                "(its content changed since): restore it, or register anew in a new --out"
            )
        now_prompts = mine["prompts"]
        if reg.prompts != now_prompts:
            raise ConfigError(
                f"the prompts differ from those registered in {out / REGISTRATION} "
                f"({reg.prompts}, now {now_prompts}): run the registered code"
            )
        modules = task_modules(plan)
        anchored = registered(reg.document, "anchor", None) or {}
        assert isinstance(anchored, dict)
        frozen = anchored.get("task_modules", modules)
        frozen = modules if frozen is None else frozen
        assert isinstance(frozen, dict)
        edited = [m for m, sha in modules.items() if frozen.get(m) != sha]
        if edited:
            raise ConfigError(
                f"the task module {edited[0]} differs from the one registered in {out / REGISTRATION} "
                "(its source changed since): run the registered code, or register anew in a new --out"
            )
        return reg
    if reg is None:
        return None
    now_ = plan.as_dict()
    changed = [k for k in now_ if reg.plan.get(k) != now_[k]]
    raise ConfigError(
        f"the plan differs from the one registered in {out / REGISTRATION} "
        f"({', '.join(changed) or 'content'} changed); run the registered plan, or register "
        "the new one in a new --out"
    )
