"""The names of the training metrics: one spelling for the trainer, the log and the plots.

Names are ``quantity/qualifier`` so TensorBoard groups them (``acc/agent_a/drafter``,
``format/challenger``, ``win_rate/agent_b``). Every name is built by :func:`key` from the
quantity constants below. :mod:`agon_env.algorithms.metrics` computes the values,
:mod:`agon_env.algorithms.run_log` writes them to ``metrics.jsonl`` and
:mod:`agon_env.evaluation.plots` reads them back: all three import the names from here, so
neither wing imports the other to learn them. Nothing here computes anything.
"""

from __future__ import annotations

# Quantities logged per role and per ``seat/role``.
REWARD = "reward"
ACC = "acc"
FORMAT = "format"
LEN_TOKENS = "len_tokens"
PROMPT_TOKENS = "prompt_tokens"
"""Tokens of a turn's text prompt (a latent challenger's cached draft prefix not counted): what an
exchange channel costs the reader, beside ``latent/tokens``."""
TRUNCATED = "truncated"
DRAFT_UNUSABLE = "draft_unusable"
"""Challenger turns shown no usable draft summary (the env's NO_SUMMARY line), or, latent, whose
draft had no span, so no cache to read."""
SUMMARY_LEAK = "summary_leak"
"""Challenger turns whose shown draft summary states the draft's final answer anyway (text
channels only: absent, not 0, for the latent channel, whose cache is no text to match)."""
SCORE_ERRORS = "score_errors"
"""How many answers the task's ``score`` gave no verdict on this step: it raised (the verifier
failed) or returned a non-bool. A count, not a rate."""
SCORE_TIMEOUTS = "score_timeouts"
"""How many answers the task's verifier timed out on this step (a count; not in ``score_errors``)."""
UNJUDGED = "unjudged"
"""``unjudged/<rate>`` (``unjudged/conversion_rate``, ``unjudged/acc/drafter``): how many of the
step's outcomes behind a rate were left out of it because an answer they need got no verdict
(``score`` raised, returned a non-verdict, or timed out; :func:`agon_env.stats.judged`). A
count, logged only on steps that have one (absent means 0): an unjudged answer is neither right
nor wrong, so it is in neither the rate's successes nor its trials."""
# Per-episode rates.
CONVERSION = "conversion_rate"
"""P(challenger right | its paired draft wrong)."""
WIN = "win_rate"
"""Per seat: right while the rival was wrong (two-seat modes)."""
TIE = "tie_rate"
CHALLENGE_CHANGED_ANSWER = "divergence/challenge_changed_answer"
"""Two-seat episodes: share whose challenger, after reading the rival's draft summary, ended
on a different final answer than that draft's.

Counted only where the challenger was shown a usable summary (latent: read a non-empty cache)
and both turns gave an answer:
a missing answer is a format failure (``format/<role>``), not a change of mind, and a turn
shown nothing read no draft. Answers compare by :func:`~agon_env.stats.answer_key`
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
LATENT_EMPTY = "latent/empty"
"""``exchange=latent``: share of challenger turns whose draft had no span (with ``span=summary``,
no summary) and so read no cache at all -- counted in ``draft_unusable`` too (by the episode's
turn, which sees the completion: the env cannot, the span being the agents' setting)."""
LATENT_BYTES = "latent/bytes"
"""``exchange=latent``: bytes of the step's stored draft caches (held until its update ends)."""
TIME_ROLLOUT = "time/rollout"
TIME_SCORING = "time/scoring"
TIME_UPDATE = "time/update"
TIME_STEP = "time/step"
PEAK_RSS = "mem/peak_rss_mb"
"""The process's peak resident memory so far (MiB, ``getrusage``): where in a run memory grows."""
MAX_ACROSS_RANKS = ("time/", "mem/")
"""Prefixes whose cross-rank value is the largest (the slowest rank, the fullest memory), not the mean."""
MACHINE = (*MAX_ACROSS_RANKS, "tokens_per_s")
"""Prefixes of metrics that measure the machine, not the run: they differ between two runs of one seed."""


def key(quantity: str, *qualifiers: str) -> str:
    """The one spelling of a metric: ``key(ACC, "agent_a", "drafter") == "acc/agent_a/drafter"``."""
    return "/".join((quantity, *qualifiers))


RATES = (ACC, FORMAT, TRUNCATED, CONVERSION, DRAFT_UNUSABLE, SUMMARY_LEAK, WIN, TIE, CHALLENGE_CHANGED_ANSWER)
"""Quantities that are shares of 0/1 outcomes: each step logs, beside the share, its counts
(:func:`successes_key`, :func:`trials_key`), so a change over several steps is judged on the
pooled counts (:func:`agon_env.stats.newcombe_interval`), not on the per-step shares."""
SUCCESSES = "successes"
TRIALS = "trials"


def is_rate(name: str) -> bool:
    """Whether the metric ``name`` is a :data:`RATES` quantity (with any qualifiers)."""
    return any(name == q or name.startswith(q + "/") for q in RATES)


def successes_key(name: str) -> str:
    """``successes/acc/drafter``: how many of the step's outcomes behind rate ``name`` were 1."""
    return key(SUCCESSES, name)


def trials_key(name: str) -> str:
    """``trials/acc/drafter``: how many outcomes the step's rate ``name`` is the share of."""
    return key(TRIALS, name)
