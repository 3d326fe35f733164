"""Per-step training metrics computed from a rollout batch.

The names are :mod:`agon_env.metric_names`' (one spelling for the trainer, the log and the
plots). Writing the metrics out is not this module's business.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import TYPE_CHECKING

from agon_env.json_value import JSONRecord
from agon_env.metric_names import (
    ACC,
    CHALLENGE_CHANGED_ANSWER,
    CONVERSION,
    DRAFT_UNUSABLE,
    FORMAT,
    LEN_TOKENS,
    PROMPT_TOKENS,
    REWARD,
    SCORE_ERRORS,
    SCORE_TIMEOUTS,
    SUMMARY_LEAK,
    TIE,
    TOKENS,
    TRUNCATED,
    WIN,
    is_rate,
    key,
    successes_key,
    trials_key,
)
from agon_env.stats import answer_key
from agon_env.vocabulary import CHALLENGER, DRAFTER

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agon_env.algorithms.rollout import RolloutBatch


def metric_samples(batch: RolloutBatch) -> dict[str, list[float]]:
    """The per-turn / per-episode values behind the step's metrics, before averaging.

    Data-parallel ranks gather these (not their means), so conditional rates such as the
    conversion rate come out exactly as one process would compute them.
    """
    acc: dict[str, list[float]] = defaultdict(list)
    for t in batch.turns:
        for q in ((t.seat, t.role), (t.role,)):
            acc[key(REWARD, *q)].append(t.reward)
            if t.score_error is None and not t.score_timeout:  # unjudged: counted apart, not wrong
                acc[key(ACC, *q)].append(float(t.correct))
            acc[key(FORMAT, *q)].append(float(t.format_ok))
            acc[key(TRUNCATED, *q)].append(float(t.completion.finish_reason == "length"))
            if t.tokens is not None:
                acc[key(LEN_TOKENS, *q)].append(t.tokens)
            if t.completion.prompt_ids:
                acc[key(PROMPT_TOKENS, *q)].append(float(len(t.completion.prompt_ids)))
        if t.role == CHALLENGER and t.draft:
            acc[DRAFT_UNUSABLE].append(float(t.draft_unusable))
            if t.leak_measured:
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
    """Means of every sample list, except :data:`TOTALS`, which are sums; each rate's counts too
    (:func:`~agon_env.metric_names.successes_key`, :func:`~agon_env.metric_names.trials_key`)."""
    out = {k: float(mean(v)) for k, v in sorted(samples.items()) if v and k not in TOTALS}
    for k, v in sorted(samples.items()):
        if v and is_rate(k):
            out[successes_key(k)], out[trials_key(k)] = float(sum(v)), float(len(v))
    for k in TOTALS:
        out[k] = float(sum(samples.get(k, [])))
    return out


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """The metrics of one batch in one process (:func:`metric_samples`, averaged)."""
    return summarize(metric_samples(batch))


def rendered_samples(
    batch: RolloutBatch, tokenizer: PreTrainedTokenizerBase, per_role: int
) -> list[JSONRecord]:
    """The first ``per_role`` turns of each role as the model saw and wrote them (``samples.jsonl``),
    with what a reader compares across a draft and its challenge (the same ``episode``): the
    problem, the summary and answer each wrote, and what the challenger was ``shown``."""
    out: list[JSONRecord] = []
    for role in (DRAFTER, CHALLENGER):
        for t in batch.stream(role)[:per_role]:
            ids = t.completion.prompt_ids
            prompt = tokenizer.decode(ids) if ids else str(t.observation.get("text", ""))
            verdict = {k: getattr(t, k) for k in ("seat", "role", "reward", "correct", "format_ok", "tokens")}
            read = {"episode": t.episode, "problem": str(t.observation.get("problem", ""))}
            wrote = {"summary": t.summary, "answer": t.answer, "shown": t.draft}
            out.append({**verdict, **read, **wrote, "prompt": prompt, "completion": t.text})
    return out
