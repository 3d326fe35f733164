"""Whether a run is learning at all: a run whose every group is dropped trains nothing, and says so.

GRPO learns from the spread of rewards within a group. When every completion of a group earns
the same reward (no completion writes the answer format, or all are wrong, or all right) the
group is dropped; when every group of a step is dropped (or every update is skipped for a
non-finite loss) no adapter moves. A run can go on like that to its last step, write its table
and exit 0. :class:`LearningWatch` reads each step's metrics and, after
``not_learning_steps`` such steps in a row, returns one warning in the user's terms: what the
completions did, how many groups had reward variance, and what to try. ``agon train`` shows it
in its log, in TensorBoard and under the summary table, and stops there with
``stop_if_not_learning``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agon_env import metric_names as M
from agon_env.json_value import JSONValue

_ANSWER_FORMAT = "a <summary> then an <answer> block"


def updated(metrics: Mapping[str, JSONValue]) -> bool:
    """Whether any adapter was updated this step: some group kept and a finite loss logged."""
    dropped = metrics.get(M.GROUPS_DROPPED)
    has_loss = any(k.startswith(f"{M.LOSS}/") and metrics[k] is not None for k in metrics)
    return has_loss and not (dropped is not None and dropped >= 1.0)


def _roles(records: Sequence[Mapping[str, JSONValue]]) -> list[str]:
    """The trained roles: those with a ``groups_dropped/<role>`` figure."""
    prefix = f"{M.GROUPS_DROPPED}/"
    return sorted({k.removeprefix(prefix) for r in records for k in r if k.startswith(prefix)})


def _all(records: Sequence[Mapping[str, JSONValue]], keys: list[str], value: float) -> bool:
    seen = [r[k] for r in records for k in keys if r.get(k) is not None]
    return bool(seen) and all(v == value for v in seen)


def idle_reason(records: Sequence[Mapping[str, JSONValue]], batch_problems: int) -> str:
    """Why ``records`` (steps that updated nothing) trained nothing, in one line with what to try."""
    roles = _roles(records)
    groups = len(records) * batch_problems * max(1, len(roles))
    kept = round(
        sum((1.0 - (r.get(M.GROUPS_DROPPED) or 0.0)) * batch_problems * max(1, len(roles)) for r in records)
    )
    steps = f"{len(records)} step{'s' if len(records) != 1 else ''}"
    if kept:
        return (
            f"not learning: every update of the last {steps} was skipped for a non-finite loss or "
            f"gradient ({kept} of {groups} groups had reward variance; nan_skipped counts them): lower "
            "--optim.lr or check the model's dtype"
        )
    formats = [M.key(M.FORMAT, role) for role in roles]
    accs = [M.key(M.ACC, role) for role in roles]
    unjudged = round(sum((r.get(M.SCORE_ERRORS) or 0.0) + (r.get(M.SCORE_TIMEOUTS) or 0.0) for r in records))
    judged_any = any(r.get(k) is not None for r in records for k in accs)
    advice = _ADVICE["hard"]
    if unjudged and not judged_any:
        # Accuracy leaves out unjudged answers: none judged is the scorer's fault, not the model's.
        what = f"the task's score() judged no answer ({unjudged} errors or time-outs)"
        advice = _ADVICE["unjudged"]
    elif _all(records, formats, 0.0):
        seats = sorted(
            {
                k.split("/")[1]
                for r in records
                for k in r
                if k.count("/") == 2 and k.startswith(f"{M.FORMAT}/")
            }
        )
        who = f"of {' or '.join(seats)} " if seats else ""
        what = f"no completion {who}wrote the answer format ({_ANSWER_FORMAT})"
        advice = _ADVICE["format"]
    elif _all(records, accs, 0.0):
        what = "no completion was right"
    elif _all(records, accs, 1.0):
        what = "every completion was right"
        advice = _ADVICE["easy"]
    else:
        what = "every completion of a problem earned the same reward"
        advice = _ADVICE["same"]
    if unjudged and judged_any:
        what += f" ({unjudged} answers not judged: score errors or time-outs)"
    return (
        f"not learning: {what} in {steps}: 0 of {groups} groups had reward variance, so no adapter "
        f"was updated; {advice}"
    )


_ADVICE = {
    "hard": "try an easier task (--env.kwargs), more rollouts per problem (--grpo.num-generations), "
    "a larger --sampling.max-new-tokens, or the worked examples (--prompts.few-shot)",
    "format": "try the worked examples (--prompts.few-shot), a larger --sampling.max-new-tokens, or "
    "more rollouts per problem (--grpo.num-generations)",
    "easy": "the task is too easy for the model: try a harder task (--env.kwargs) or a higher "
    "--sampling.temperature",
    "same": "try more rollouts per problem (--grpo.num-generations) or a higher --sampling.temperature",
    "unjudged": "fix the task's scorer (score_errors, score_timeouts in metrics.jsonl)",
}
"""What to try, by what the completions did (why no group had reward variance)."""


class LearningWatch:
    """Counts steps in a row that updated nothing; says why once there are ``after`` of them."""

    def __init__(self, after: int, batch_problems: int) -> None:
        self.after = after
        self.batch_problems = batch_problems
        self.idle: list[Mapping[str, JSONValue]] = []
        self.warning: str | None = None
        """The warning, once given (kept for the summary table)."""
        self.steps = 0
        self.updated_any = False

    def at_end(self, updates: float) -> str | None:
        """The run's closing note when it updated nothing at all (``updates``: the trainer's count
        over the run, resumed parts too), whatever its length: the warning, or why now."""
        if updates or self.updated_any or not self.steps:
            return None
        if self.warning is not None:
            return self.warning
        return idle_reason(self.idle, self.batch_problems).replace(
            "not learning:", "no update in the whole run:", 1
        )

    def update(self, metrics: Mapping[str, JSONValue]) -> str | None:
        """The warning when this step makes ``after`` idle steps in a row (the first time only)."""
        self.steps += 1
        if updated(metrics):
            self.updated_any = True
            self.idle.clear()
            return None
        self.idle.append(metrics)
        if not self.after or len(self.idle) != self.after or self.warning is not None:
            return None
        self.warning = idle_reason(self.idle, self.batch_problems)
        return self.warning
