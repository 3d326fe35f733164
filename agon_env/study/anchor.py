"""A study's anchor: one fingerprint of everything ``agon study register`` freezes, meant to be
published before any unit runs (a commit, a preregistration site, a paper's appendix).

A results file carries a copy of its registration, so it cannot vouch for itself: whoever edits it
can edit the copy and recompute every hash in it. The fingerprint lives outside it. It hashes
(:func:`anchor`):

- the plan's content hash and its preset's, and, spelled out, the decision rule and the seeds;
- every test problem each task level the plan can run at (each calibration candidate, or the plan's
  own keywords) would be scored on: its id *and* the sha256 of its prompt, so an id no longer names
  another problem than the one registered;
- the prompt families (each family's system messages and worked examples, and the exchange's
  wording, :func:`agon_env.study.registration.prompts_fingerprint`);
- the source (sha256) of every task module the plan imports: the module behind each arm's env id
  (built-in or the user's) and every module of ``train.imports``.

:func:`fingerprint` is the sha256 of that mapping's canonical JSON; ``agon study verify
--fingerprint SHA`` recomputes it (``agon_env.study.binding``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from agon_env.json_value import JSONRecord
from agon_env.study.plan import StudyPlan

if TYPE_CHECKING:
    from agon_env.evaluation.splits import EvalData

FINGERPRINTED = ("arithmetic", "code-function", "code-stdio", "math")
"""The built-in prompt families the prompts' fingerprint hashes (the recorded studies' ``prompts``
are this hash); the anchor hashes these and every family a plan's task names."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def levels(plan: StudyPlan) -> list[JSONRecord]:
    """The task keywords the plan's units can run at: one per calibration candidate (which one the
    calibration takes is measured after the registration), else the plan's own (``{}``)."""
    from agon_env.study.units import level

    cal = plan.calibration
    return [{cal.keyword: level(v)} for v in cal.candidates] if cal is not None else [{}]


def level_key(task: JSONRecord) -> str:
    """A task level as the anchor's ``problems`` names it (``difficulty=2.5``; ``""``: the plan's own)."""
    return ",".join(f"{k}={v}" for k, v in sorted(task.items()))


def draw(plan: StudyPlan, task: JSONRecord) -> EvalData:
    """The evaluation problems every unit at task level ``task`` draws (``agon eval``'s own draw,
    seed 0): an ``EvalData``."""
    from agon_env.evaluation.splits import load_eval_data

    cfg, e = plan.base_config(), plan.evaluation
    kwargs = {**cfg.env.kwargs, **task}
    return load_eval_data(cfg.env.id, kwargs, "test", e.test_problems, e.val_problems, seed=0)


def test_problems(data: EvalData) -> dict[str, list[str]]:
    """An ``EvalData``'s test problems: their ids and each normalised prompt's sha256, so an id
    re-derives its problem."""
    from agon_env.study.results import sha

    prompts = [data.test.task[i].prompt for i in data.test.indices]
    return {"ids": data.test.ids(), "prompt_sha256": [sha(p) for p in prompts]}


def rederive(env_id: str, kwargs: JSONRecord, test: int, val: int) -> dict[str, list[str]]:
    """The test problems of a results file's task, drawn again from its env id and keywords."""
    from agon_env.evaluation.splits import load_eval_data

    return test_problems(load_eval_data(env_id, kwargs, "test", test, val, seed=0))


def entry_module(env_id: str) -> str:
    """The module that defines ``env_id``'s task (its entry point's; importing ``module:`` ids)."""
    from agon_env.registry import spec

    entry = spec(env_id).entry_point
    return entry.partition(":")[0] if isinstance(entry, str) else entry.__module__


def module_source(module: str) -> str:
    """The sha256 of ``module``'s source file (``missing`` when it has none to read)."""
    found = importlib.util.find_spec(module)
    origin = Path(found.origin) if found is not None and found.origin else None
    return sha256_bytes(origin.read_bytes()) if origin is not None and origin.is_file() else "missing"


def task_modules(plan: StudyPlan) -> dict[str, str]:
    """Module -> the sha256 of its source, for each arm's task and every ``train.imports`` module."""
    from agon_env.config import import_user_modules

    names: list[str] = []
    for arm in plan.arms:
        cfg = plan.unit_config(arm, plan.seeds[0])
        import_user_modules(list(cfg.imports))
        prefix = cfg.env.id.partition(":")[0] if ":" in cfg.env.id else ""  # a ``module:id``
        names += [*cfg.imports, prefix, entry_module(cfg.env.id)]
    return {m: module_source(m) for m in sorted(set(names) - {""})}


def prompt_families(plan: StudyPlan, tasks: list[JSONRecord], exchange: str) -> dict[str, str]:
    """The sha256 of each prompt family the units can read: the built-in ones, each task level's own
    (``prompt_family``; the user's once their module is imported) and any an arm names;
    ``exchange``: the built-in families' and the exchange wording's fingerprint
    (``registration.prompts_fingerprint``, which a registration records already)."""
    from agon_env.agents.prompts import PROMPT_FAMILIES, family_of

    named = {plan.unit_config(arm, plan.seeds[0]).prompts.family for arm in plan.arms}
    used = {family_of(t, f) for t in tasks for f in named}
    return {
        **{k: sha256_bytes(repr(PROMPT_FAMILIES[k]).encode()) for k in sorted({*FINGERPRINTED, *used})},
        "exchange": exchange,
    }


def anchor(plan: StudyPlan, preset: str | None, exchange: str) -> JSONRecord:
    """Everything a registration of ``plan`` freezes, as the fingerprint hashes it (``preset``: its
    preset's sha256; ``exchange``: the prompts' fingerprint; both as ``registration`` computes them)."""
    whole = plan.as_dict()
    modules = task_modules(plan)  # first: a user's module registers its task and its prompt family
    drawn = {level_key(task): draw(plan, task) for task in levels(plan)}
    return {
        "plan_sha256": plan.sha256(),
        "preset_sha256": preset,
        "decision": whole["decision"],
        "seeds": whole["seeds"],
        "eval_seeds": whole["evaluation"]["seeds"],
        "problems": {key: test_problems(data) for key, data in drawn.items()},
        "prompt_families": prompt_families(plan, [d.test.task for d in drawn.values()], exchange),
        "task_modules": modules,
    }


def fingerprint(frozen: JSONRecord) -> str:
    """The sha256 of an :func:`anchor` mapping's canonical JSON (key order aside)."""
    return sha256_bytes(json.dumps(frozen, sort_keys=True, ensure_ascii=False).encode())
