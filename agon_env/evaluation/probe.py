"""Will a rival help here? The generation–verification gap, measured before any training.

A two-stage cascade (a draft, then a reader who sees its summary) can only beat its drafter
where the reader checks better than the drafter solves. It keeps a right draft with
probability ``keep`` and turns a wrong one right with probability ``fix``, so with solve
rate ``p`` its pass@1 is ``p·keep + (1 − p)·fix``, which beats ``p`` exactly when

    (1 − p) · fix  >  p · (1 − keep)        (what it fixes outweighs what it breaks)

The probe measures the three rates for one model on one task, in minutes:

* **solve** -- ``samples`` drafts per validation problem, the bare problem in the env's
  ``solo`` mode (pass@1);
* **verify** -- every one of those drafts shown to the model in the challenger's seat,
  through the env's own prompt and exchange channel (``challenge`` mode, the env's
  ``redact_answer`` and other keywords as given), scored by the env. The drafts are the
  model's own samples, so they look like its own work; right and wrong ones are whatever
  the model produced, and ``keep``/``fix`` are conditioned on them (the balanced
  accuracy -- a half-right, half-wrong set -- is their mean);
* **gap** -- two-stage pass@1 minus solve, paired on the problem (percentile bootstrap
  over problems, each problem's samples kept together), and the break-even rates: the
  ``fix`` needed at the measured ``keep`` and the ``keep`` needed at the measured ``fix``.

The same model reads its own drafts here (the untrained rival; a trained one is what
``agon train`` makes), so the probe answers "is there anything for a reader to gain on
this task, at this size", not "how much will training gain". See docs/evaluation.md.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from agon_env.agents.protocol import Agent
from agon_env.envs.tasks.verify import normalize
from agon_env.episodes import Start, play_episodes
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.seeding import derive_seed
from agon_env.stats import paired_bootstrap, rate
from agon_env.vocabulary import AGENT_A, AGENT_B

if TYPE_CHECKING:
    from agon_env.agents.protocol import Completion
    from agon_env.envs.draft_challenge import DraftChallengeEnv
    from agon_env.envs.turns import TurnResult


@dataclass(frozen=True)
class ProbeOutcome:
    """One draft and the model's reading of it."""

    problem_id: str
    draft_correct: bool
    reader_correct: bool
    reader_changed: bool
    """The reader's answer differs from the draft's (a missing answer on either side counts as changed)."""
    leak: bool
    """The summary the reader was shown states the draft's answer (the env's ``summary_leak``)."""
    draft_unjudged: str | None = None
    """Why the verifier gave the draft no verdict (left out of every rate): ``timeout`` (a code answer over
    its time limit among them) or ``error``; None when it judged. Files written before the field
    existed read as judged."""
    reader_unjudged: str | None = None
    """The same for the reader's answer."""

    @property
    def draft_verdict(self) -> bool | None:
        """:attr:`draft_correct`, or ``None`` when unjudged: every rate leaves it out
        (:func:`agon_env.stats.judged`)."""
        return None if self.draft_unjudged else self.draft_correct

    @property
    def reader_verdict(self) -> bool | None:
        """:attr:`reader_correct`, or ``None`` when unjudged."""
        return None if self.reader_unjudged else self.reader_correct


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and normalize(a) == normalize(b)


class Replay:
    """An agent that hands back recorded completions in order: the drafts, replayed for the reader."""

    def __init__(self, name: str, completions: Sequence[Completion]) -> None:
        self.name, self._queue = name, list(completions)

    def act(
        self, observations: Sequence[Mapping[str, JSONValue]], *, seeds: Sequence[int] | None = None
    ) -> list[Completion]:
        if len(observations) > len(self._queue):
            raise RuntimeError(
                f"replay has {len(self._queue)} completions for {len(observations)} observations"
            )
        out, self._queue = self._queue[: len(observations)], self._queue[len(observations) :]
        return out


def run_probe(
    solo_env: DraftChallengeEnv,
    challenge_env: DraftChallengeEnv,
    drafter: Agent,
    reader: Agent,
    problem_indices: Sequence[int],
    samples: int = 4,
    seed: int = 0,
) -> list[ProbeOutcome]:
    """Draft ``samples`` times per problem with ``drafter``, then let ``reader`` challenge each draft.

    ``solo_env`` and ``challenge_env`` are template envs over the same task (modes ``solo``
    and ``challenge``); the drafts are replayed verbatim into the challenge env, which
    scores them again (the verdicts must agree) and shows the reader their summaries.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    starts = [
        Start(int(i), AGENT_A, derive_seed(seed, "probe", int(i), j))
        for i in problem_indices
        for j in range(samples)
    ]

    def seed_of(episode: int, seat: str, turn: int) -> int:
        return derive_seed(seed, "probe-sample", episode, seat, turn)

    drafts = play_episodes(solo_env, {AGENT_A: drafter}, starts, seed_of).episodes
    completions = [e.draft.completion for e in drafts]
    read = play_episodes(
        challenge_env, {AGENT_A: Replay(AGENT_A, completions), AGENT_B: reader}, starts, seed_of
    ).episodes
    out = []
    for d, r in zip(drafts, read, strict=True):
        if r.draft.correct != d.draft.correct:
            raise RuntimeError(
                f"problem {d.problem_id}: the env scored one draft two ways; the task is not pure"
            )
        challenge = r.challenge
        assert challenge is not None
        out.append(
            ProbeOutcome(
                problem_id=d.problem_id,
                draft_correct=d.draft.correct,
                reader_correct=challenge.correct,
                reader_changed=not _same(challenge.answer, d.draft.answer),
                leak=challenge.summary_leak,
                draft_unjudged=_unjudged(d.draft),
                reader_unjudged=_unjudged(challenge),
            )
        )
    return out


def _unjudged(turn: TurnResult) -> str | None:
    return "timeout" if turn.score_timeout else "error" if turn.score_error is not None else None


def fix_needed(solve: float, keep: float | None) -> float | None:
    """The fix rate at which a cascade breaks even with its drafter, ``p(1 − keep)/(1 − p)``
    (None when it is undefined: no right draft to keep, or no wrong one to fix)."""
    return solve * (1 - keep) / (1 - solve) if (keep is not None and solve < 1) else None


def analyse(outcomes: Sequence[ProbeOutcome], confidence: float = 0.95) -> JSONRecord:
    """The rates, the gap with its paired interval, the break-even rates and a verdict (JSON-ready)."""
    if not outcomes:
        raise ValueError("no probe outcomes to analyse")
    by_problem: dict[str, list[ProbeOutcome]] = defaultdict(list)
    for o in outcomes:
        by_problem[o.problem_id].append(o)
    # unjudged answers are in no rate (stats.judged): a draft not judged is neither right nor wrong
    solve_pp = [[rate([o.draft_verdict for o in v]).rate for v in by_problem.values()]]
    two_stage_pp = [[rate([o.reader_verdict for o in v]).rate for v in by_problem.values()]]
    right = [o for o in outcomes if o.draft_verdict is True]
    wrong = [o for o in outcomes if o.draft_verdict is False]
    keep = rate([o.reader_verdict for o in right], confidence)
    fix = rate([o.reader_verdict for o in wrong], confidence)
    reject = rate([o.reader_changed for o in wrong], confidence)
    solve = rate([o.draft_verdict for o in outcomes], confidence)
    p = solve.rate if solve.rate is not None else 0.0
    two_stage = rate([o.reader_verdict for o in outcomes]).rate
    judged_both = any(a is not None and b is not None for a, b in zip(*two_stage_pp, *solve_pp, strict=True))
    gap = paired_bootstrap(two_stage_pp, solve_pp, confidence) if judged_both else None
    k, f = keep.rate, fix.rate
    keep_needed = 1 - (1 - p) * f / p if (f is not None and p > 0) else None
    result = {
        "problems": len(by_problem),
        "drafts": len(outcomes),
        "confidence": confidence,
        "solve": solve.to_dict(),
        "keep": {**keep.to_dict(), "of": "right drafts the reader kept right"},
        "fix": {**fix.to_dict(), "of": "wrong drafts the reader turned right"},
        "reject": {
            **reject.to_dict(),
            "of": "wrong drafts whose answer the reader changed (a missing answer counts as a change)",
        },
        "balanced_verify": None if k is None or f is None else (k + f) / 2,
        "two_stage": two_stage,
        "gap": None if gap is None else gap.to_dict(),  # None: no problem judged at both stages
        "fix_needed_at_keep": fix_needed(p, k),
        "keep_needed_at_fix": keep_needed,
        "summary_leak": sum(o.leak for o in outcomes) / len(outcomes),
        # Answers the verifier gave no verdict (code over its time limit, ...): in no rate above.
        "score_timeouts": sum(
            u == "timeout" for o in outcomes for u in (o.draft_unjudged, o.reader_unjudged)
        ),
        "score_errors": sum(u == "error" for o in outcomes for u in (o.draft_unjudged, o.reader_unjudged)),
        "how": "gap: two-stage − solve, percentile bootstrap over problems (each problem's drafts together)",
    }
    result["verdict"] = verdict(result)
    return result


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def verdict(result: Mapping[str, JSONValue]) -> str:
    """One line: can a rival help here, and why (from :func:`analyse`'s figures)."""
    gap, keep, fix = result["gap"], result["keep"]["rate"], result["fix"]["rate"]
    if gap is None:
        return "cannot tell: the verifier judged no problem's drafts and readings both"
    diff = (
        f"two-stage − solve {100 * gap['mean']:+.1f} pp [{100 * gap['low']:+.1f}, {100 * gap['high']:+.1f}]"
    )
    rates = f"the reader keeps {_pct(keep)} of right drafts and fixes {_pct(fix)} of wrong ones"
    if gap["low"] > 0:
        return f"a rival can help here: {rates}; {diff}"
    if gap["high"] < 0:
        need = result["fix_needed_at_keep"]
        tail = (
            f"; at that keep rate it would have to fix {_pct(need)}" if need is not None and need <= 1 else ""
        )
        return f"it cannot: {rates}, so it breaks more than it fixes ({diff}){tail}"
    return f"cannot tell from {result['problems']} problems: {rates}; {diff} includes 0"


def table_rows(result: Mapping[str, JSONValue]) -> list[tuple[str, str, str]]:
    """``(quantity, value, interval)`` rows of the printed table."""

    def row(name: str, r: Mapping[str, JSONValue]) -> tuple[str, str, str]:
        cell = f"{r['successes']}/{r['trials']} = {_pct(r['rate'])}" if r["trials"] else "–"
        return name, cell, f"[{_pct(r['low'])}, {_pct(r['high'])}]" if r["trials"] else "–"

    gap = result["gap"] or {"mean": math.nan, "low": math.nan, "high": math.nan}
    return [
        row("solve (pass@1)", result["solve"]),
        row("keep (right draft stays right)", result["keep"]),
        row("fix (wrong draft made right)", result["fix"]),
        row("reject (wrong draft's answer changed; no answer counts)", result["reject"]),
        ("two-stage (draft, then reader)", _pct(result["two_stage"]), "–"),
        (
            "gap: two-stage − solve (paired)",
            f"{100 * gap['mean']:+.1f} pp",
            f"[{100 * gap['low']:+.1f}, {100 * gap['high']:+.1f}] pp",
        ),
        ("fix needed at this keep rate", _pct(result["fix_needed_at_keep"]), "–"),
        ("summary states the draft's answer", _pct(result["summary_leak"]), "–"),
    ]


def outcomes_to_dicts(outcomes: Sequence[ProbeOutcome]) -> list[JSONRecord]:
    return [asdict(o) for o in outcomes]


__all__ = ["ProbeOutcome", "Replay", "analyse", "run_probe", "table_rows", "verdict"]
