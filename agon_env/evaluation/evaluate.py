"""The evaluator: every method on the same test problems, with the paper's baselines.

Methods (``--methods``) are the rows of :data:`agon_env.evaluation.methods.METHODS`.

Every agent is wrapped in a :class:`~agon_env.evaluation.cache.CachedAgent`, so the
first turns that several methods share (a drafter's standalone sample is its cascade
draft; the few-shot base's sample is the MoA draft) are generated once, and the base's samples
persist on disk across evaluations.

The result is a plain dict (JSON-ready): per method, per-seed and pooled pass@1 with
Clopper–Pearson intervals, pass@k over seeds, trace lengths, conversion rates, and every
episode's outcome so any figure can be recomputed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agon_env.envs.exchange import CHANNELS
from agon_env.episodes import Episode, Start, play_episodes
from agon_env.errors import InputError
from agon_env.evaluation.cache import CachedAgent, SampleCache
from agon_env.evaluation.methods import BASE, DEFAULT_METHODS, Method, Policies, plan_methods
from agon_env.evaluation.selection import Candidate, select_then_report
from agon_env.evaluation.splits import EvalData, Part
from agon_env.json_value import JSONRecord, JSONValue
from agon_env.seeding import derive_seed
from agon_env.stats import (
    answer_agreement,
    cluster_bootstrap,
    complementarity,
    conversion,
    length_stats,
    pass_at_k_table,
    pooled,
    problem_counts,
    rate,
    spread,
)
from agon_env.vocabulary import AGENT_A

PAIR_STREAM = "second-sample"
"""Seed key of the base's second independent sample (its blind-spot baseline)."""


# -- summaries ---------------------------------------------------------------------------


def summarize(episodes: Mapping[int, Sequence[Episode]], confidence: float = 0.95) -> JSONRecord:
    """Per-seed and pooled figures of one method; ``episodes`` maps seed -> its episodes."""
    all_eps = [e for eps in episodes.values() for e in eps]
    unit = "tokens" if all_eps and all(e.tokens is not None for e in all_eps) else "chars"

    def length(e: Episode) -> int | None:
        return e.tokens if unit == "tokens" else e.chars

    def final_length(e: Episode) -> int | None:
        return e.turns[-1].tokens if unit == "tokens" else e.turns[-1].chars

    per_seed = {}
    for seed, eps in episodes.items():
        r = rate([e.correct for e in eps], confidence)
        ls = length_stats([length(e) for e in eps])
        per_seed[str(seed)] = {"pass@1": r.to_dict(), "mean_length": ls.mean, "median_length": ls.median}
    seed_rates = [rate([e.correct for e in eps], confidence) for eps in episodes.values()]
    by_problem: dict[int, list[bool | None]] = defaultdict(list)
    for e in all_eps:
        by_problem[e.problem_index].append(e.correct)
    ls_all = length_stats([length(e) for e in all_eps])
    out: JSONRecord = {
        "pass@1": pooled(seed_rates, confidence).to_dict(),
        "pass@1_across_seeds": spread([r.rate for r in seed_rates]).__dict__,
        # Several samples of one problem are not independent: resample problems, not trials.
        "pass@1_clustered": dict(
            zip(("low", "high"), cluster_bootstrap(list(by_problem.values()), confidence), strict=True),
            how="percentile bootstrap over problems (each problem's samples kept together)",
        ),
        "pass@k": {str(k): v for k, v in pass_at_k_table(problem_counts(by_problem.values())).items()},
        "length_unit": unit,
        "mean_length": ls_all.mean,
        "median_length": ls_all.median,
        "mean_final_length": length_stats([final_length(e) for e in all_eps]).mean,
        "format_rate": rate([e.format_ok for e in all_eps], confidence).rate,
        "per_seed": per_seed,
    }
    out["score_errors"] = sum(t.score_error is not None for e in all_eps for t in e.turns)
    out["score_timeouts"] = sum(t.score_timeout for e in all_eps for t in e.turns)
    # Turns cut at max_new_tokens (the backend's finish reason "length"): a model that only ever
    # runs to the cap writes no answer, whatever else the table says.
    out["turns"] = sum(len(e.turns) for e in all_eps)
    out["token_cap"] = sum(
        getattr(t.completion, "finish_reason", "stop") == "length" for e in all_eps for t in e.turns
    )
    challenges = [e.challenge for e in all_eps if e.challenge is not None and e.challenge.draft]
    if challenges:
        # What the second turn was really shown: no usable summary, or one that states the answer.
        out["draft_unusable"] = rate([t.draft_unusable for t in challenges], confidence).rate
        usable = [t for t in challenges if t.leak_measured]
        out["summary_leak"] = rate([t.summary_leak for t in usable], confidence).rate if usable else None
    if all_eps and len(all_eps[0].turns) > 1:
        out["first_turn_pass@1"] = rate([e.first_correct for e in all_eps], confidence).to_dict()
        out["conversion"] = conversion(
            [e.first_correct for e in all_eps], [e.correct for e in all_eps], confidence
        ).to_dict()
    return out


def outcomes(method: Mapping[str, JSONValue], ids: Sequence[str], key: str = "correct") -> list[int | None]:
    """A method result's 0/1 outcomes in the order of ``ids`` (problem ids; one sample per problem):
    the final answer (``correct``) or, for two-turn methods, the draft (``first_correct``);
    ``None`` where the answer was not judged (:func:`agon_env.stats.judged`)."""
    by_id = {e["problem_id"]: None if e[key] is None else int(e[key]) for e in method["episodes"]}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ValueError(f"an evaluation lacks problems {missing[:3]}: was it run on other problems?")
    return [by_id[i] for i in ids]


def stored_episodes(
    method: Mapping[str, JSONValue], seeds: Sequence[int]
) -> dict[tuple[int, str], JSONRecord]:
    """A stored method result's episodes by (evaluation seed, problem id).

    A report stores them seed by seed, each seed's problems in one block (what
    :meth:`Evaluation.run` writes); an episode's own ``seed`` is its sampling stream, not the
    evaluation seed, so the block is the only record of which seed an episode belongs to."""
    eps = method["episodes"]
    if len(eps) % len(seeds):
        raise ValueError(f"{len(eps)} episodes cannot be {len(seeds)} seeds' equal blocks")
    block = len(eps) // len(seeds)
    return {(seeds[i // block], e["problem_id"]): e for i, e in enumerate(eps)}


def _paired(
    a: Mapping[int, Sequence[Episode]],
    b: Mapping[int, Sequence[Episode]],
    of: Callable[[Episode], object] = lambda e: e.correct,
) -> tuple[list[object], list[object]]:
    """``of`` each episode of two methods matched on (seed, problem), in a fixed order
    (outcomes by default; ``lambda e: e.turns[-1].answer`` for the final answers)."""
    xs, ys = [], []
    for seed in sorted(set(a) & set(b)):
        bmap = {e.problem_index: e for e in b[seed]}
        for e in a[seed]:
            if e.problem_index in bmap:
                xs.append(of(e))
                ys.append(of(bmap[e.problem_index]))
    return xs, ys


def _answer(e: Episode) -> str | None:
    return e.turns[-1].answer


# -- the run -----------------------------------------------------------------------------


@dataclass
class Evaluator:
    """Runs methods on :class:`EvalData`. Sampling seeds are per turn:
    ``derive_seed(seed, "eval", policy identity, problem id, turn, stream)``, so every
    policy samples from its own stream (two adapters never share noise), a policy's
    draft of a problem is the same sample in every method that starts with it (the
    cache serves it once), and the base's second sample is independent of its first.
    """

    data: EvalData
    seeds: Sequence[int] = (0,)
    methods: Sequence[str] = DEFAULT_METHODS
    confidence: float = 0.95
    cache: SampleCache = field(default_factory=SampleCache)
    log: Callable[[str], None] = lambda _msg: None
    blind_spots: bool = True
    """Also report error overlap (two adapters; two base samples, which costs a second base
    sample per problem). The end-of-run held-out check turns it off."""

    def _run(
        self,
        method: Method,
        policies: Policies,
        part: Part,
        seeds: Sequence[int],
        stream: str = "",
    ) -> dict[int, list[Episode]]:
        exchange = method.family.exchange or policies.exchange
        env = self.data.env(method.family.env_mode, part, exchange, policies.env_options)
        indices = part.indices
        shots = method.family.few_shot
        who = {seat: policies.identity(name, shots) for seat, name in method.seats}
        seats = {
            seat: CachedAgent(policies.agent(name, shots), who[seat], self.cache, persistent=name == BASE)
            for seat, name in method.seats
        }
        if CHANNELS[env.exchange].cache:  # drafts come from the sample cache; challenges read their caches
            from agon_env.agents.latent import LatentAgent, LatentStore

            store = LatentStore()
            seats = {
                seat: LatentAgent(policies.agent(name, shots), store, policies.latent, seats[seat], False)
                for seat, name in method.seats
            }
        problem_ids = part.ids()
        out = {}
        for seed in seeds:
            starts = [Start(i, AGENT_A, derive_seed(seed, "eval-episode", i)) for i in indices]

            def seed_of(i: int, seat: str, turn: int, seed: int = seed) -> int:
                return derive_seed(seed, "eval", who[seat], problem_ids[i], turn, stream)

            out[seed] = play_episodes(env, seats, starts, seed_of).episodes
        return out

    def evaluate(self, policies: Policies) -> JSONRecord:
        """All planned methods on the test problems, plus direction selection and complementarity."""
        start = time.perf_counter()
        hits0, misses0 = self.cache.hits, self.cache.misses
        methods = plan_methods(policies, self.methods)
        test = self.data.test
        results: JSONRecord = {}
        episodes: dict[str, dict[int, list[Episode]]] = {}
        for m in methods:
            t0 = time.perf_counter()
            episodes[m.id] = self._run(m, policies, test, self.seeds)
            results[m.id] = {
                "family": m.family.name,
                "env_mode": m.family.env_mode,
                "policies": list(m.policies),
                **summarize(episodes[m.id], self.confidence),
                "seconds": time.perf_counter() - t0,
                "episodes": [e.to_dict() for s in self.seeds for e in episodes[m.id][s]],  # stored_episodes
            }
            acc = results[m.id]["pass@1"]["rate"]
            shown = "unjudged" if acc is None else f"{acc:.3f}"
            self.log(f"{policies.label} {m.id}: pass@1 {shown} ({time.perf_counter() - t0:.1f}s)")
        out: JSONRecord = {"label": policies.label, "algo": policies.algo, "methods": results}
        cascades = [m for m in methods if m.family.chooses_direction]
        if cascades:
            out["selection"] = self._select(cascades, policies, results)
        if self.blind_spots:
            out["complementarity"] = self._complementarity(policies, methods, episodes)
        out["seconds"] = time.perf_counter() - start
        out["cache"] = {"hits": self.cache.hits - hits0, "misses": self.cache.misses - misses0}
        return out

    def _select(self, cascades: list[Method], policies: Policies, results: JSONRecord) -> JSONRecord:
        """Choose the cascade direction on validation; the choice never reads test results."""
        val = self.data.validation
        if not val.indices:
            raise InputError(
                "cascade needs validation problems to choose its direction; set --val-problems > 0"
            )
        candidates: dict[str, Candidate] = {}
        for m in cascades:
            t0 = time.perf_counter()
            eps = self._run(m, policies, val, self.seeds)
            flat = [e for s in self.seeds for e in eps[s]]
            lengths = length_stats([e.tokens if e.tokens is not None else e.chars for e in flat])
            candidates[m.id] = Candidate(rate([e.correct for e in flat], self.confidence), lengths.mean)
            acc = candidates[m.id].accuracy.rate
            shown = "unjudged" if acc is None else f"{acc:.3f}"
            self.log(f"{policies.label} {m.id} on validation: {shown} ({time.perf_counter() - t0:.1f}s)")
        test_candidates = {
            m.id: Candidate(
                rate([e["correct"] for e in results[m.id]["episodes"]], self.confidence),
                results[m.id]["mean_length"],
            )
            for m in cascades
        }
        choice, _ = select_then_report(
            candidates,
            {m.id: results[m.id] for m in cascades},
            val.prompts(),
            self.data.test.prompts(),
            test_candidates=test_candidates,
        )
        for m in cascades:
            results[m.id]["selected"] = m.id == choice.chosen
        return choice.to_dict()

    def _complementarity(
        self, policies: Policies, methods: list[Method], episodes: dict[str, dict[int, list[Episode]]]
    ) -> JSONRecord:
        """Error overlap of the two adapters alone, and of two independent base samples."""
        out: JSONRecord = {}

        def conversions(base: bool) -> JSONRecord:
            return {
                m.id: _conversion(episodes[m.id])
                for m in methods
                if m.family.uses_base == base and len(m.seats) == 2
            }

        singles = [m for m in methods if m.family.single_sample and not m.family.uses_base]
        if len(singles) >= 2:
            a, b = singles[0], singles[1]
            xs, ys = _paired(episodes[a.id], episodes[b.id])
            out["adapters"] = {
                "pair": [a.policies[0], b.policies[0]],
                **complementarity(xs, ys).to_dict(),
                # Each adapter alone on the same problems and seed: how often they disagree at all.
                "answers_differ": answer_agreement(
                    *_paired(episodes[a.id], episodes[b.id], _answer)
                ).to_dict(),
                "conversion": conversions(base=False),
            }
        base_single = next((m for m in methods if m.family.single_sample and m.family.uses_base), None)
        if base_single is not None:
            second = self._run(base_single, policies, self.data.test, self.seeds, stream=PAIR_STREAM)
            xs, ys = _paired(episodes[base_single.id], second)
            out["base"] = {
                "pair": ["base sample 1", "base sample 2"],
                **complementarity(xs, ys).to_dict(),
                "answers_differ": answer_agreement(
                    *_paired(episodes[base_single.id], second, _answer)
                ).to_dict(),
                "conversion": conversions(base=True),
            }
        return out


def _conversion(eps: Mapping[int, Sequence[Episode]]) -> JSONRecord:
    flat = [e for seed_eps in eps.values() for e in seed_eps]
    return conversion([e.first_correct for e in flat], [e.correct for e in flat]).to_dict()
