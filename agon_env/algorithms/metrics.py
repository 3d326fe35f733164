"""Per-step training metrics computed from a rollout batch, and their names.

Names are ``quantity/qualifier`` so TensorBoard groups them (``acc/agent_a/drafter``,
``format/challenger``, ``win_rate/agent_b``). Every name is built here, by :func:`key`
from the quantity constants below; the logger, the summary table and the plots
(:mod:`agon_env.algorithms.run_log`, :mod:`agon_env.evaluation.plots`) import them, so a
metric has exactly one spelling. Writing the metrics out is not this module's business.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import TYPE_CHECKING, Any

from agon_env.evaluation.stats import answer_key
from agon_env.vocabulary import CHALLENGER, DRAFTER

if TYPE_CHECKING:
    from agon_env.algorithms.rollout import RolloutBatch

# Quantities logged per role and per ``seat/role``.
REWARD = "reward"
ACC = "acc"
FORMAT = "format"
LEN_TOKENS = "len_tokens"
TRUNCATED = "truncated"
DRAFT_UNUSABLE = "draft_unusable"
"""Challenger turns shown no usable draft summary (the env's NO_SUMMARY line)."""
SUMMARY_LEAK = "summary_leak"
"""Challenger turns whose shown draft summary states the draft's final answer anyway."""
SCORE_ERRORS = "score_errors"
"""How many answers the task's ``score`` gave no verdict on this step: it raised (the verifier
failed) or returned a non-bool. A count, not a rate."""
SCORE_TIMEOUTS = "score_timeouts"
"""How many answers the task's verifier timed out on this step (a count; not in ``score_errors``)."""
# Per-episode rates.
CONVERSION = "conversion_rate"
"""P(challenger right | its paired draft wrong)."""
WIN = "win_rate"
"""Per seat: right while the rival was wrong (two-seat modes)."""
TIE = "tie_rate"
CHALLENGE_CHANGED_ANSWER = "divergence/challenge_changed_answer"
"""Two-seat episodes: share whose challenger, after reading the rival's draft summary, ended
on a different final answer than that draft's.

Counted only where the challenger was shown a usable summary and both turns gave an answer:
a missing answer is a format failure (``format/<role>``), not a change of mind, and a turn
shown nothing read no draft. Answers compare by :func:`~agon_env.evaluation.stats.answer_key`
(strings, whitespace and case ignored), so ``4.0`` after ``4`` counts as a change.

It measures how often reading a draft ends in another answer: a fall means the challenger
keeps the draft's answer more often, not that the two adapters answer alike. The drafts of
a step all come from one adapter, so how often the two adapters' *independent* answers to a
problem differ is measured in evaluation (``complementarity.adapters.answers_differ``)."""
KL = "divergence/kl"
"""Mean per-token KL(π_drafter ‖ π_challenger), k3 estimator, on the step's first
``divergence_kl_rollouts`` drafts (sampled by the drafter, re-scored under the challenger's
adapter at the drafter's temperature). The drafter seat follows the plugin's schedule --
alternating in agon, coop, margin and hidden-draft -- so consecutive steps measure
KL(a‖b) and KL(b‖a) in turn, not one fixed direction."""
# Step-level figures the trainer adds.
TOKENS = "tokens"
TOKENS_PER_S = "tokens_per_s"
GROUPS_DROPPED = "groups_dropped"
NAN_SKIPPED = "nan_skipped"
LOSS = "loss"
GRAD_NORM = "grad_norm"
LR = "lr"
EPOCH = "epoch"
ONPOLICY = "onpolicy"
"""Sampler-trainer mismatch per adapter: ``onpolicy/kl/agent_a``, ``onpolicy/mean_abs_diff/…``,
``onpolicy/max_abs_diff/…``, ``onpolicy/is_weight_mean/…``, ``onpolicy/over_cap_frac/…``."""
LATENT_TOKENS = "latent/tokens"
"""``exchange=latent``: mean tokens of draft cache a challenger turn was conditioned on."""
LATENT_BYTES = "latent/bytes"
"""``exchange=latent``: bytes of the step's stored draft caches (held until its update ends)."""
TIME_ROLLOUT = "time/rollout"
TIME_SCORING = "time/scoring"
TIME_UPDATE = "time/update"
TIME_STEP = "time/step"


def key(quantity: str, *qualifiers: str) -> str:
    """The one spelling of a metric: ``key(ACC, "agent_a", "drafter") == "acc/agent_a/drafter"``."""
    return "/".join((quantity, *qualifiers))


def metric_samples(batch: RolloutBatch) -> dict[str, list[float]]:
    """The per-turn / per-episode values behind the step's metrics, before averaging.

    Data-parallel ranks gather these (not their means), so conditional rates such as the
    conversion rate come out exactly as one process would compute them.
    """
    acc: dict[str, list[float]] = defaultdict(list)
    for t in batch.turns:
        for q in ((t.seat, t.role), (t.role,)):
            acc[key(REWARD, *q)].append(t.reward)
            acc[key(ACC, *q)].append(float(t.correct))
            acc[key(FORMAT, *q)].append(float(t.format_ok))
            acc[key(TRUNCATED, *q)].append(float(t.completion.finish_reason == "length"))
            if t.tokens is not None:
                acc[key(LEN_TOKENS, *q)].append(t.tokens)
        if t.role == CHALLENGER and t.draft:
            acc[DRAFT_UNUSABLE].append(float(t.draft_unusable))
            if not t.draft_unusable:
                acc[SUMMARY_LEAK].append(float(t.summary_leak))
        if t.answer:
            acc[SCORE_ERRORS].append(float(t.score_error is not None))
            acc[SCORE_TIMEOUTS].append(float(t.score_timeout))
    for ep in batch.episodes:
        d, c = ep.turn(DRAFTER), ep.challenge
        if d is None or c is None:
            continue
        if not d.correct:
            acc[CONVERSION].append(float(c.correct))  # the challenger fixed a wrong draft
        if d.seat != c.seat:
            for me, mine, theirs in ((d.seat, d.correct, c.correct), (c.seat, c.correct, d.correct)):
                acc[key(WIN, me)].append(float(mine and not theirs))
            acc[TIE].append(float(d.correct == c.correct))
            drafted, challenged = answer_key(d.answer), answer_key(c.answer)
            if drafted and challenged and c.draft and not c.draft_unusable:
                acc[CHALLENGE_CHANGED_ANSWER].append(float(drafted != challenged))
    acc[TOKENS].append(float(sum(t.tokens or 0 for t in batch.turns)))
    return dict(acc)


def merge_samples(parts: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    """Concatenate the samples of several ranks key by key."""
    out: dict[str, list[float]] = defaultdict(list)
    for part in parts:
        for k, v in part.items():
            out[k].extend(v)
    return dict(out)


TOTALS = (TOKENS, SCORE_ERRORS, SCORE_TIMEOUTS)
"""Samples that are summed over the step rather than averaged."""


def summarize(samples: dict[str, list[float]]) -> dict[str, float]:
    """Means of every sample list, except :data:`TOTALS`, which are sums."""
    out = {k: float(mean(v)) for k, v in sorted(samples.items()) if v and k not in TOTALS}
    for k in TOTALS:
        out[k] = float(sum(samples.get(k, [])))
    return out


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """The metrics of one batch in one process (:func:`metric_samples`, averaged)."""
    return summarize(metric_samples(batch))


def rendered_samples(batch: RolloutBatch, tokenizer: Any, per_role: int) -> list[dict[str, Any]]:
    """The first ``per_role`` turns of each role as the model saw and wrote them (``samples.jsonl``)."""
    out: list[dict[str, Any]] = []
    for role in (DRAFTER, CHALLENGER):
        for t in batch.stream(role)[:per_role]:
            ids = t.completion.prompt_ids
            prompt = tokenizer.decode(ids) if ids else str(t.observation.get("text", ""))
            verdict = {k: getattr(t, k) for k in ("seat", "role", "reward", "correct", "format_ok", "tokens")}
            out.append({**verdict, "prompt": prompt, "completion": t.text})
    return out
