"""Per-step training metrics computed from a rollout batch.

The names are :mod:`agon_env.metric_names`' (one spelling for the trainer, the log and the
plots). Writing the metrics out is not this module's business.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
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
    UNJUDGED,
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


def _outcome(acc: dict[str, list[float]], name: str, outcome: bool | None) -> None:
    """One outcome of rate ``name``; an unjudged one (``None``) is counted under
    ``unjudged/<name>`` instead (:data:`~agon_env.metric_names.UNJUDGED`), never as a 0."""
    if outcome is None:
        acc[key(UNJUDGED, name)].append(1.0)
    else:
        acc[name].append(float(outcome))


def _both(a: bool | None, b: bool | None, of: Callable[[bool, bool], bool]) -> bool | None:
    """``of(a, b)``, or ``None`` (unjudged) when either verdict is missing."""
    return None if a is None or b is None else of(a, b)


def metric_samples(batch: RolloutBatch) -> dict[str, list[float]]:
    """The per-turn / per-episode values behind the step's metrics, before averaging.

    Data-parallel ranks gather these (not their means), so conditional rates such as the
    conversion rate come out exactly as one process would compute them.
    """
    acc: dict[str, list[float]] = defaultdict(list)
    for t in batch.turns:
        for q in ((t.seat, t.role), (t.role,)):
            acc[key(REWARD, *q)].append(t.reward)
            _outcome(acc, key(ACC, *q), t.verdict)
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
        drafted_ok, challenged_ok = d.verdict, c.verdict
        if drafted_ok is None:  # not known wrong: no conversion to count
            _outcome(acc, CONVERSION, None)
        elif not drafted_ok:
            _outcome(acc, CONVERSION, challenged_ok)  # the challenger fixed a wrong draft
        if d.seat != c.seat:
            for me, mine, theirs in (
                (d.seat, drafted_ok, challenged_ok),
                (c.seat, challenged_ok, drafted_ok),
            ):
                _outcome(acc, key(WIN, me), _both(mine, theirs, lambda m, t: m and not t))
            _outcome(acc, TIE, _both(drafted_ok, challenged_ok, lambda a, b: a == b))
            drafted, challenged = answer_key(d.answer), answer_key(c.answer)
            if drafted and challenged and c.draft and not c.draft_unusable:
                # over the episodes the rates above count: one with an unjudged turn is counted apart
                unjudged = drafted_ok is None or challenged_ok is None
                _outcome(acc, CHALLENGE_CHANGED_ANSWER, None if unjudged else drafted != challenged)
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


def _summed(name: str) -> bool:
    return name in TOTALS or name.startswith(UNJUDGED + "/")


def summarize(samples: dict[str, list[float]]) -> dict[str, float]:
    """Means of every sample list, except :data:`TOTALS` and the ``unjudged/`` counts, which are
    sums; each rate's counts too (:func:`~agon_env.metric_names.successes_key`,
    :func:`~agon_env.metric_names.trials_key`)."""
    out = {k: float(mean(v)) for k, v in sorted(samples.items()) if v and not _summed(k)}
    out |= {k: float(sum(v)) for k, v in sorted(samples.items()) if k.startswith(UNJUDGED + "/")}
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
            verdict = {k: getattr(t, k) for k in ("seat", "role", "reward", "format_ok", "tokens")}
            verdict["correct"] = t.verdict  # null: the task gave no verdict (not a wrong answer)
            read = {"episode": t.episode, "problem": str(t.observation.get("problem", ""))}
            wrote = {"summary": t.summary, "answer": t.answer, "shown": t.draft}
            out.append({**verdict, **read, **wrote, "prompt": prompt, "completion": t.text})
    return out
