"""Every check a training config gets before it runs, with a one-line fix per problem.

The choice tables (algorithms, backends, dtypes, schedules, advantages, aggregations)
live with the code that uses them and are imported here, not restated. That is why the
check is here and not in :mod:`agon_env.config` (the torch-free floor evaluation also
reads): :func:`ready` is the one check a config gets before it trains.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Mapping

from agon_env.config import ConfigError, TrainConfig, compose, import_modules, leaf_keys
from agon_env.json_value import JSONValue
from agon_env.options import ENV_KWARGS
from agon_env.resolved import ResolvedRun, dtype_on, settle


def _checks(c: TrainConfig) -> list[tuple[bool, str]]:
    # The choice tables live with the code that uses them; torch loads only here.
    from agon_env.agents.latent_spans import SPANS
    from agon_env.algorithms.blowup import LR_MAX
    from agon_env.algorithms.grpo import ADVANTAGES, AGGREGATIONS
    from agon_env.algorithms.registry import get_algorithm
    from agon_env.algorithms.rollout_correction import CORRECTIONS
    from agon_env.algorithms.schedules import DECAYS
    from agon_env.algorithms.trackers import refusal
    from agon_env.envs.draft_challenge import option_problems
    from agon_env.envs.exchange import CHANNELS
    from agon_env.runtime import BACKENDS, DTYPES

    def need(key: str, ok: Callable[[object], bool], fix: str) -> tuple[bool, str]:
        value = functools.reduce(getattr, key.split("."), c)
        return bool(ok(value)), f"{key} = {value!r}: {fix}"

    def one_of(key: str, choices: Collection[str]) -> tuple[bool, str]:
        return need(key, lambda v: v in choices, f"choose one of {sorted(choices)}")

    try:
        adapters, algo = list(get_algorithm(c.algo).adapters), (True, "")
    except ValueError as exc:
        adapters, algo = None, (False, f"algo: {exc}")
    at_least_1, algo_set = "set it to 1 or more", {"mode", "reward_scheme"}
    channel = CHANNELS.get(c.env.exchange)
    untracked = refusal(c.report_to)  # a tracker that is unknown or not installed
    return [
        *_finite(c),
        algo,
        need("steps", lambda v: v >= 1, at_least_1),
        need("batch_problems", lambda v: v >= 1, at_least_1),
        need("save_every", lambda v: v >= 1, at_least_1),
        need("snapshot_every", lambda v: v >= 0, "use 0 (no snapshots) or a step count"),
        need("time_budget_min", lambda v: v >= 0, "use 0 (no budget) or minutes > 0"),
        need("threads", lambda v: v >= 0, "use 0 (torch default) or a positive count"),
        need("not_learning_steps", lambda v: v >= 0, "use 0 (never warn) or a step count"),
        need("divergence_kl_rollouts", lambda v: v >= 0, "use 0 (KL metric off) or a positive count"),
        need("samples_per_role", lambda v: v >= 0, "use 0 (no samples.jsonl) or a positive count"),
        need("heldout_problems", lambda v: v >= 0, "use 0 (no held-out check) or a problem count"),
        need("report_to", lambda v: untracked is None, str(untracked)),
        need(
            "grpo.micro_batch_tokens", lambda v: v is None or v >= 1, "use null (rows only) or a token count"
        ),
        (
            c.sampling.max_new_tokens < c.model.max_seq_len,
            f"sampling.max_new_tokens = {c.sampling.max_new_tokens} leaves no room for a prompt within "
            f"model.max_seq_len = {c.model.max_seq_len}: raise max_seq_len or lower the budget",
        ),
        need("grpo.num_generations", lambda v: v >= 2, "GRPO needs N ≥ 2 rollouts per group"),
        one_of("grpo.advantage", ADVANTAGES),
        one_of("grpo.aggregation", AGGREGATIONS),
        need("grpo.eps", lambda v: 0 < v < 1, "the clip range must be in (0, 1), e.g. 0.2"),
        need("grpo.eps_high", lambda v: v is None or v >= c.grpo.eps, "must be ≥ grpo.eps or null"),
        need("grpo.beta", lambda v: v >= 0, "the KL weight must be ≥ 0 (0 = no reference forward)"),
        need("grpo.inner_iters", lambda v: v >= 1, at_least_1),
        need("grpo.max_grad_norm", lambda v: v >= 0, "use 0 (no clipping) or a norm > 0"),
        need("grpo.micro_batch", lambda v: v >= 1, at_least_1),
        one_of("grpo.rollout_correction", CORRECTIONS),
        need("grpo.rollout_correction_cap", lambda v: v >= 1, "the cap must be ≥ 1, e.g. 2"),
        need("grpo.onpolicy_max_kl", lambda v: v is None or v > 0, "use null (guard off) or a KL > 0"),
        need(
            "sampling.top_p",
            lambda v: v == 1,
            "training needs top_p = 1: the update's log-probs are over the whole vocabulary, so a "
            "nucleus-truncated sampler is off-policy for it (top_p < 1 is for agon eval)",
        ),
        need(
            "sampling.top_k",
            lambda v: v == 0,
            "training needs top_k = 0: the update's log-probs are over the whole vocabulary "
            "(top_k is for agon eval)",
        ),
        need(
            "sampling.min_p",
            lambda v: v == 0,
            "training needs min_p = 0: the update's log-probs are over the whole vocabulary "
            "(min_p is for serving)",
        ),
        need(
            "sampling.repetition_penalty",
            lambda v: v == 1,
            "training needs repetition_penalty = 1: the update's log-probs are the model's own "
            "(it is for serving)",
        ),
        need(
            "sampling.min_tokens",
            lambda v: v == 0,
            "training needs min_tokens = 0: masking EOS is off-policy for the update (it is for serving)",
        ),
        need(
            "sampling.seed",
            lambda v: v is None,
            "training seeds every turn from `seed` (agon_env.seeding); leave sampling.seed unset",
        ),
        need(
            "optim.lr",
            lambda v: 0 < v <= LR_MAX,
            f"the learning rate must be > 0 and at most {LR_MAX:g}, e.g. 5e-5 (AdamW moves each weight "
            f"by about lr a step and LoRA weights are about 1e-2: above {LR_MAX:g} the first step replaces "
            "them)",
        ),
        need("optim.warmup_ratio", lambda v: 0 <= v < 1, "must be in [0, 1)"),
        one_of("optim.schedule", DECAYS),
        need("optim.weight_decay", lambda v: v >= 0, "must be ≥ 0"),
        need("sampling.temperature", lambda v: v > 0, "training samples, so it must be > 0"),
        need("temperatures", lambda v: all(t > 0 for t in v.values()), "every temperature must be > 0"),
        need("temperatures", lambda v: set(v) <= set(adapters or v), f"{c.algo} uses adapters {adapters}"),
        need("first_drafter", lambda v: v in (adapters or [v]), f"{c.algo} uses adapters {adapters}"),
        one_of("model.backend", BACKENDS),
        one_of("model.device", ("auto", "cpu", "cuda")),
        one_of("model.dtype", ("auto", *DTYPES)),
        need("model.gpu_memory_utilization", lambda v: 0 < v <= 1, "must be in (0, 1]"),
        need("model.lora_r", lambda v: v >= 1, at_least_1),
        need("model.lora_alpha", lambda v: v > 0, "must be > 0"),
        need("model.lora_b_init_std", lambda v: v >= 0, "use 0 (zero init) or a std > 0"),
        *((False, f"env.{problem}") for problem in option_problems(c.env)),  # the env's own check
        need(
            "env.kwargs", lambda v: not algo_set & set(v), f"the algo decides {sorted(algo_set)}: drop them"
        ),
        need(
            "env.kwargs",
            lambda v: not (set(v) & (ENV_KWARGS - algo_set)),
            "env keywords have their own keys: set env.<name> (--env.<name>) instead",
        ),
        one_of("latent.span", SPANS),
        need("latent.max_tokens", lambda v: v >= 1, at_least_1),
        need("latent.layers", lambda v: all(i >= 0 for i in v), "layer indices are 0 or more"),
        (
            channel is None or channel.backends is None or c.model.backend in channel.backends,
            channel.refusal if channel else "",
        ),
        need(
            "model.gradient_checkpointing",
            lambda v: not (v and channel is not None and channel.cache),
            f"exchange = {c.env.exchange!r} reads a stored cache, which transformers drops under "
            "gradient checkpointing",
        ),
    ]


def _finite(c: TrainConfig) -> list[tuple[bool, str]]:
    """Every float option finite: no setting means anything at inf or nan (``--lr inf`` trained
    adapters whose every weight was NaN), and a range check such as ``v > 0`` lets inf through."""
    out = []
    for key in leaf_keys():
        value = functools.reduce(getattr, key.split("."), c)
        numbers = value.items() if isinstance(value, Mapping) else [("", value)]
        for name, v in numbers:
            if isinstance(v, float) and not math.isfinite(v):
                where = f"{key}.{name}" if name else key
                out.append((False, f"{where} = {v!r}: use a finite number"))
    return out


def validate(cfg: TrainConfig) -> TrainConfig:
    """Raise :class:`ConfigError` listing every problem, else return ``cfg`` (:func:`ready` imports first)."""
    problems = [msg for ok, msg in _checks(cfg) if not ok]
    if problems:
        if len(problems) == 1:
            raise ConfigError(f"invalid training config: {problems[0]}")
        raise ConfigError("invalid training config:\n  - " + "\n  - ".join(problems))
    return cfg


def ready(cfg: TrainConfig) -> TrainConfig:
    """Import ``cfg.imports`` (they may register tasks and algorithms), then :func:`validate`:
    the one check a config gets before it runs."""
    import_modules(cfg)
    return validate(cfg)


def resolve(cfg: TrainConfig) -> ResolvedRun:
    """``cfg``, made :func:`ready`, resolved once (:mod:`agon_env.resolved`): the algorithm's
    seats, mode, reward scheme and channel, each policy's sampling, the device and dtype.
    What training hands on to everything that acts on the run."""
    from agon_env.agents.models import resolve_device
    from agon_env.algorithms.registry import get_algorithm

    ready(cfg)
    plugin = get_algorithm(cfg.algo).mirrored(cfg.first_drafter)
    device = resolve_device(cfg.model.device)
    dtype = dtype_on(cfg.model.dtype, device)
    return settle(
        cfg,
        adapters=plugin.adapters,
        mode=plugin.env_mode,
        reward_scheme=plugin.reward_scheme,
        exchange=plugin.exchange,
        device=device,
        dtype=dtype,
    )


def load_config(preset: str | None = None, overrides: Mapping[str, JSONValue] | None = None) -> TrainConfig:
    """``TrainConfig()`` or ``preset``, then ``overrides`` (:func:`agon_env.config.compose`), ready to run."""
    return ready(compose(preset, overrides))
