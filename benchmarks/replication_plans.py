"""What a CPU replication runs: its arms, the sizes of each plan, and what every unit's training is told.

``benchmarks/replicate_cpu.py`` runs a :class:`Plan` (``--plan NAME`` starts from :data:`PLANS`)
and records it in ``plan.json`` and the results file (:meth:`Plan.record`). A new arm is one
row of :data:`ARMS`, a new study one entry of :data:`PLANS` (its pre-registration names it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ARMS: dict[str, tuple[str, dict[str, object]]] = {
    "grpo": ("grpo", {}),
    "coop": ("coop", {}),
    "agon": ("agon", {}),
    "hidden-draft": ("hidden-draft", {}),
    "agon-redacted": ("agon", {"env.redact_answer": True}),
    "agon-latent": ("agon", {"env.exchange": "latent"}),
    "agon-none": ("agon", {"env.exchange": "none"}),
}
"""Arm -> (``agon train --algo``, ``TrainConfig`` overrides beyond the plan's). ``agon-redacted`` is
agon whose challenger reads the draft's summary with every statement of the draft's answer
blanked, in training and in evaluation (``agon eval`` reads a run with its own exchange);
``agon-latent`` reads the draft's KV cache instead of its text, ``agon-none`` reads nothing
(issue #25's channels)."""
TWO_STAGE = {"grpo": "self-cascade"}
"""An arm's two-stage method where it is not ``cascade`` (the run's own channel): the paper pits
Agon's cascade against GRPO's self-cascade."""


def two_stage(arm: str) -> str:
    """``arm``'s two-stage method (:data:`TWO_STAGE`, else ``cascade``)."""
    return TWO_STAGE.get(arm, "cascade")


TARGET_BAND = (0.20, 0.40)
"""Base few-shot pass@1 the issue asks for: the paper's hard regime, yet groups with reward variance."""
ARITH = "agon/arith-v0"
"""The task whose level calibration searches (``difficulty``); any other env runs as its kwargs say."""
TRAINING_KEYS = ("model", "env", "task_kwargs", "difficulty", "steps", "batch_problems", "num_generations",
                 "max_new_tokens", "temperature", "lr", "test_problems", "val_problems", "eval_seeds",
                 "prompts")  # fmt: skip
"""Recorded settings a resumed replication must share with the one on disk (seeds and arms may
grow); any other ``train`` override must match too (:func:`other_settings`)."""
RECORDED = {
    "model": "model.name",
    "env": "env.id",
    "task_kwargs": "env.kwargs",
    "steps": "steps",
    "batch_problems": "batch_problems",
    "num_generations": "grpo.num_generations",
    "max_new_tokens": "sampling.max_new_tokens",
    "temperature": "sampling.temperature",
    "lr": "optim.lr",
    "threads": "threads",
    "micro_batch_tokens": "grpo.micro_batch_tokens",
}
"""The training settings a plan record names (plan.json, the results file's ``plan``: the names
files have always had), each a ``TrainConfig`` key; also this script's flags of those names."""
TRAIN = {"steps": 60, "batch_problems": 4, "threads": 1, "grpo.micro_batch_tokens": 2048}
"""Every unit's ``agon train`` as overrides of its defaults (``TrainConfig()``, the default run):
one thread per process (two units side by side on 2 cores), and a cap on one update chunk's
padded tokens so two agon runs side by side stay under ~10 GB."""
UNIT = {
    "model.device": "cpu",
    "progress": False,
    "time_budget_min": 0,
    "heldout_problems": 0,
    "save_every": 5,
}
"""What every unit's run is told besides the plan: no wall-clock budget (every arm runs all its
steps) and no end-of-run held-out check (the evaluation after it is the larger one)."""


@dataclass
class Plan:
    """Every size of one replication; ``--plan NAME`` starts from :data:`PLANS` (``--quick``: ``quick``)."""

    difficulty: float | None = None
    """``agon/arith-v0``'s level; None = calibrate over ``candidates`` (other envs: measured once)."""
    candidates: list[float] = field(default_factory=lambda: [2.5, 3, 2])
    calibration_problems: int = 100
    arms: list[str] = field(default_factory=lambda: ["grpo", "coop", "agon"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    test_problems: int = 200
    val_problems: int = 50
    eval_seeds: list[int] = field(default_factory=lambda: [0])
    prompts: str = ""
    """Fingerprint of the prompts the units ran with (set when units run; "" = recorded before
    issue #22, i.e. the prompts of 35d8054): a resume under other prompts is refused."""
    train: dict[str, Any] = field(default_factory=lambda: dict(TRAIN))
    """``TrainConfig`` overrides (dotted keys) of every unit's training run; the evaluations
    sample as it does (temperature, max_new_tokens)."""

    def config(self) -> Any:
        """The ``TrainConfig`` the units train with (torch-free)."""
        from agon_env.config import from_dict

        return from_dict(self.train)

    def record(self) -> dict[str, Any]:
        """plan.json and the results file's ``plan``: the fields, and each :data:`RECORDED`
        setting as it resolves (what the tables and :func:`other_settings` read)."""
        cfg = self.config()
        return {**{k: _get(cfg, key) for k, key in RECORDED.items()}, **asdict(self)}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Plan:
        """A plan back from its record; one written before ``train`` existed (its settings
        flat, every one given) becomes the same overrides."""
        fields = {k: v for k, v in record.items() if k not in RECORDED}
        if "train" not in fields:
            fields["train"] = {RECORDED[k]: v for k, v in record.items() if k in RECORDED}
        return cls(**fields)

    def task(self, difficulty: float | None) -> dict[str, Any]:
        """Every unit's task keywords (``env.kwargs``) at the level calibration chose (None: none)."""
        env = self.config().env
        level = {} if difficulty is None or env.id != ARITH else {"difficulty": lv(difficulty)}
        return {**level, **env.kwargs}


def _get(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


QUICK = {
    "candidates": [3],
    "calibration_problems": 16,
    "seeds": [0],
    "test_problems": 12,
    "val_problems": 6,
    "train": {
        **TRAIN,
        "steps": 2,
        "batch_problems": 2,
        "grpo.num_generations": 2,
        "sampling.max_new_tokens": 24,
    },
}
"""``--quick``: every stage at the smallest sizes that still give every number."""

STUDY_2 = {
    "difficulty": 2.5,
    "arms": ["grpo", "coop", "agon", "agon-redacted"],
    "test_problems": 300,
    "val_problems": 150,
}
"""``--plan study-2``: the pre-registered second study (docs/results/preregistration-2.md); every
other size is the replication's."""
EXCHANGE_3 = {
    "difficulty": 2.5,
    "arms": ["agon", "agon-latent", "agon-none"],
    "test_problems": 120,
    "val_problems": 40,
    "train": {**TRAIN, "steps": 15},
}
"""``--plan exchange-3``: issue #25's comparison of the channels a challenger reads its draft
through (summary text, the draft's KV cache, nothing) at equal steps, three seeds; a quarter of
the replication's steps and 160 instead of 250 problems, so the nine units fit one sitting."""
PLANS = {"quick": QUICK, "study-2": STUDY_2, "exchange-3": EXCHANGE_3}


def lv(d: float) -> int | float:
    """A level as ``agon/arith-v0`` spells it (``3.0`` -> ``3``): folder names and flags stay stable."""
    return int(d) if float(d).is_integer() else float(d)
