import pytest
from eval_fakes import FakeAgent, hashed

from agon_env.agents.prompts import RolePrompts
from agon_env.envs.tasks.base import normalize_prompt
from agon_env.evaluation.cache import SampleCache
from agon_env.evaluation.evaluate import Evaluator, stored_episodes
from agon_env.evaluation.methods import Policies, method_of, plan_methods
from agon_env.evaluation.splits import distinct_sample, load_eval_data


def never(_p):
    return False


def always(_p):
    return True


@pytest.fixture(scope="module")
def data():
    return load_eval_data("agon/arith-v0", {"difficulty": 4}, problems=40, val_problems=20, seed=0)


def policies(base=None, **adapters):
    return Policies(label="run", base=base, adapters=adapters)


def test_samples_are_distinct_seeded_sorted_and_exclude_what_is_taken(data):
    task = data.test.task
    first = distinct_sample(task, 30, seed=1, key="test")
    prompts = [task[i].prompt for i in first]
    assert len(first) == 30 and len(set(prompts)) == 30 and first == sorted(first)
    assert first == distinct_sample(task, 30, seed=1, key="test")
    assert first != distinct_sample(task, 30, seed=2, key="test")
    other = distinct_sample(
        task, 20, seed=1, key="validation", exclude={normalize_prompt(p) for p in prompts}
    )
    assert not {normalize_prompt(task[i].prompt) for i in other} & {normalize_prompt(p) for p in prompts}


def test_plan_covers_each_method_and_skips_what_cannot_run():
    two = policies(FakeAgent("base", always), agent_a=FakeAgent("a", always), agent_b=FakeAgent("b", always))
    ids = [m.id for m in plan_methods(two, ["base-few-shot", "moa", "standalone", "self-cascade", "cascade"])]
    assert ids == [
        "base-few-shot",
        "moa",
        "standalone:agent_a",
        "standalone:agent_b",
        "self-cascade:agent_a",
        "self-cascade:agent_b",
        "cascade:agent_a>agent_b",
        "cascade:agent_b>agent_a",
    ]
    base_only = Policies(label="base", base=FakeAgent("base", always))
    planned = plan_methods(base_only, ["base-few-shot", "cascade", "standalone"])
    assert [m.id for m in planned] == ["base-few-shot"]
    with pytest.raises(ValueError, match="unknown eval method"):
        plan_methods(two, ["best-of-n"])


def test_accuracies_match_what_the_agents_can_solve(data):
    base = FakeAgent("base", hashed("base", 3))
    a = FakeAgent("a", hashed("a", 2))
    b = FakeAgent("b", hashed("b", 4), fixes=True)
    ev = Evaluator(data, seeds=[0])
    res = ev.evaluate(policies(base, agent_a=a, agent_b=b))
    m = res["methods"]
    prompts = [data.test.task[i].prompt for i in data.test.indices]
    n = len(prompts)

    def frac(f):
        return sum(map(f, prompts)) / n

    assert m["base-few-shot"]["pass@1"]["rate"] == pytest.approx(frac(hashed("base", 3)))
    assert m["standalone:agent_a"]["pass@1"]["rate"] == pytest.approx(frac(hashed("a", 2)))
    assert m["standalone:agent_b"]["pass@1"]["rate"] == pytest.approx(frac(hashed("b", 4)))
    # b fixes every draft it reads; a reading b's draft is right only where a solves it.
    assert m["cascade:agent_a>agent_b"]["pass@1"]["rate"] == 1.0
    assert m["cascade:agent_a>agent_b"]["conversion"]["rate"] == 1.0
    assert m["cascade:agent_b>agent_a"]["pass@1"]["rate"] == pytest.approx(frac(hashed("a", 2)))
    assert m["self-cascade:agent_b"]["pass@1"]["rate"] == 1.0
    assert m["self-cascade:agent_b"]["first_turn_pass@1"]["rate"] == pytest.approx(frac(hashed("b", 4)))
    # Cascade trace length counts the draft (5 tokens) and the reading turn (10).
    assert m["cascade:agent_a>agent_b"]["mean_length"] == 15.0
    assert m["cascade:agent_a>agent_b"]["length_unit"] == "tokens"
    assert m["standalone:agent_a"]["mean_length"] == 5.0
    lo, hi = m["base-few-shot"]["pass@1"]["low"], m["base-few-shot"]["pass@1"]["high"]
    assert lo < m["base-few-shot"]["pass@1"]["rate"] < hi

    comp = res["complementarity"]["adapters"]
    fa = {p for p in prompts if not hashed("a", 2)(p)}
    fb = {p for p in prompts if not hashed("b", 4)(p)}
    both = sum(1 for p in prompts if p in fa and p in fb)
    assert comp["both_wrong"] == both
    assert comp["exactly_one_wrong"] == sum(1 for p in prompts if (p in fa) != (p in fb))
    assert comp["conversion"]["cascade:agent_a>agent_b"]["rate"] == 1.0
    # a reading b's wrong draft is right exactly where a solves the problem alone.
    assert comp["conversion"]["cascade:agent_b>agent_a"]["rate"] == pytest.approx(len(fb - fa) / len(fb))
    # The base's two samples are deterministic here, so their failure sets coincide exactly.
    base_wrong = sum(1 for p in prompts if not hashed("base", 3)(p))
    assert base_wrong > 0
    pair = res["complementarity"]["base"]
    assert (pair["jaccard"], pair["both_wrong"], pair["exactly_one_wrong"]) == (1.0, base_wrong, 0)


def test_direction_is_chosen_on_validation(data):
    a = FakeAgent("a", hashed("a", 2))
    b = FakeAgent("b", hashed("b", 4), fixes=True)
    res = Evaluator(data, seeds=[0], methods=["cascade"]).evaluate(policies(agent_a=a, agent_b=b))
    sel = res["selection"]
    assert sel["chosen"] == "cascade:agent_a>agent_b"
    assert sel["validation"]["cascade:agent_a>agent_b"]["trials"] == len(data.validation.indices)
    assert res["methods"]["cascade:agent_a>agent_b"]["selected"] is True
    assert res["methods"]["cascade:agent_b>agent_a"]["selected"] is False


def test_agents_are_called_once_per_stage_on_the_whole_batch(data):
    a, b = FakeAgent("a", always), FakeAgent("b", never)
    Evaluator(data, seeds=[0], methods=["standalone", "cascade"]).evaluate(policies(agent_a=a, agent_b=b))
    n_test, n_val = len(data.test.indices), len(data.validation.indices)
    # Every call is a whole split; drafts shared by standalone and cascade come from the cache.
    assert set(a.calls) <= {n_test, n_val} and set(b.calls) <= {n_test, n_val}
    # a: test drafts, val drafts (a>b), test challenges (b>a), val challenges (b>a)
    assert sorted(a.calls) == sorted([n_test, n_val, n_test, n_val])


def test_several_seeds_give_spread_and_pass_at_k(data):
    import random

    rng = random.Random(0)

    def coin(_p):
        return rng.random() < 0.5

    base = FakeAgent("base", coin)
    res = Evaluator(data, seeds=[0, 1, 2, 3], methods=["base-few-shot"]).evaluate(Policies("base", base))
    z = res["methods"]["base-few-shot"]
    assert z["pass@1"]["trials"] == 4 * len(data.test.indices)
    assert set(z["per_seed"]) == {"0", "1", "2", "3"}
    assert z["pass@1_across_seeds"]["std"] > 0
    assert set(z["pass@k"]) == {"1", "2", "4"}
    assert z["pass@k"]["1"] == pytest.approx(z["pass@1"]["rate"])
    assert z["pass@k"]["1"] < z["pass@k"]["2"] < z["pass@k"]["4"]
    # The stored episodes read back by evaluation seed: each seed's block gives its own rate.
    stored = stored_episodes(z, [0, 1, 2, 3])
    assert len(stored) == 4 * len(data.test.indices)
    for seed in range(4):
        got = [e["correct"] for (s, _), e in stored.items() if s == seed]
        assert sum(got) / len(got) == pytest.approx(z["per_seed"][str(seed)]["pass@1"]["rate"])
    with pytest.raises(ValueError, match="equal blocks"):
        stored_episodes(z, [0, 1, 2, 3, 4, 5, 6])


def test_base_samples_persist_on_disk(tmp_path, data):
    base = FakeAgent("base", hashed("base", 3))
    ev = Evaluator(data, seeds=[0], methods=["base-few-shot", "moa"], cache=SampleCache(tmp_path))
    first = ev.evaluate(Policies("base", base, identities={"base": "fake-base|T=1"}))
    assert first["cache"]["misses"] > 0
    calls = len(base.calls)
    # A fresh process (new cache object) reads the same samples back: no new generation.
    again = Evaluator(data, seeds=[0], methods=["base-few-shot", "moa"], cache=SampleCache(tmp_path))
    second = again.evaluate(Policies("base", base, identities={"base": "fake-base|T=1"}))
    assert len(base.calls) == calls and second["cache"]["misses"] == 0
    assert second["methods"]["moa"]["pass@1"] == first["methods"]["moa"]["pass@1"]
    # Another identity (say another temperature) must not hit those entries.
    other = Evaluator(data, seeds=[0], methods=["base-few-shot"], cache=SampleCache(tmp_path))
    assert (
        other.evaluate(Policies("base", base, identities={"base": "fake-base|T=0.5"}))["cache"]["hits"] == 0
    )


def test_cached_completions_keep_their_temperature(tmp_path):
    from agon_env.agents.protocol import Completion
    from agon_env.evaluation.cache import CachedAgent

    class Hot:
        name = "hot"

        def act(self, observations, *, seeds=None):
            return [Completion(text="x", completion_ids=[1], temperature=1.25) for _ in observations]

    obs = [{"text": "q", "problem": "q", "draft": "", "role": 0}]
    CachedAgent(Hot(), "hot|T=1.25", SampleCache(tmp_path), persistent=True).act(obs, seeds=[3])
    # Read back by a fresh process (a new cache object) from disk: the temperature came along.
    never_called = FakeAgent("none", never)
    again = CachedAgent(never_called, "hot|T=1.25", SampleCache(tmp_path), persistent=True).act(
        obs, seeds=[3]
    )
    assert again[0].temperature == 1.25 and never_called.calls == []


class SeedLog(FakeAgent):
    """A FakeAgent that records the seed it was given for each (problem, role)."""

    def __init__(self, name, solves):
        super().__init__(name, solves)
        self.seeds: dict[tuple[str, int], list[int]] = {}

    def act(self, observations, *, seeds=None):
        for o, s in zip(observations, seeds, strict=True):
            self.seeds.setdefault((o["problem"], int(o["role"])), []).append(s)
        return super().act(observations, seeds=seeds)


def test_every_policy_samples_its_own_stream_and_drafts_are_shared(data):
    base, a, b = SeedLog("base", always), SeedLog("a", always), SeedLog("b", always)
    pol = Policies("run", base, {"agent_a": a, "agent_b": b}, {"base": "B", "agent_a": "A", "agent_b": "Bb"})
    Evaluator(data, seeds=[0]).evaluate(pol)
    problem = next(iter(k for k in a.seeds if k[1] == 0))[0]
    # The two adapters' drafts of one problem draw different noise...
    assert a.seeds[(problem, 0)][0] != b.seeds[(problem, 0)][0]
    # ...a's draft is sampled once (cached) and reused by its cascade and self-cascade...
    assert len(a.seeds[(problem, 0)]) == 1
    # ...and the base's second sample (the blind-spot baseline) is another stream.
    assert len(set(base.seeds[(problem, 0)])) == 2


class PromptedAgent(FakeAgent):
    """A fake that renders with :class:`RolePrompts`: right only when it sees the worked examples."""

    def __init__(self, few_shot: bool = True) -> None:
        super().__init__("base", always)
        self.prompts = RolePrompts(few_shot=few_shot)

    def act(self, observations, *, seeds=None):
        self.solves = lambda _p: self.prompts.few_shot  # this agent's (or its copy's) prompts
        return super().act(observations, seeds=seeds)


@pytest.mark.parametrize("run_few_shot", [True, False])
def test_the_base_rows_show_the_worked_examples_or_not_whatever_the_run_says(data, run_few_shot):
    """``base-few-shot`` is the base after the worked examples and ``base-zero-shot`` the base
    without them (its own cache entries and seed stream), so each label holds for any run."""
    base = PromptedAgent(run_few_shot)
    ev = Evaluator(data, seeds=[0], methods=["base-few-shot", "base-zero-shot", "moa"])
    res = ev.evaluate(Policies("base", base, identities={"base": "fake"}))["methods"]
    assert res["base-few-shot"]["pass@1"]["rate"] == 1.0 and res["base-zero-shot"]["pass@1"]["rate"] == 0.0
    assert res["moa"]["pass@1"]["rate"] == float(run_few_shot)  # the other rows keep the run's prompts
    assert base.prompts.few_shot is run_few_shot  # the variant is a copy
    pol = Policies("base", base, identities={"base": "fake"})
    assert pol.identity("base", True) != pol.identity("base", False)
    assert pol.identity("base", run_few_shot) == "fake"  # shared with MoA's draft: one sample


def test_an_agent_with_its_own_prompts_has_no_zero_shot_row_and_old_names_are_read():
    pol = Policies("base", FakeAgent("base", always))
    assert [m.id for m in plan_methods(pol, ["base-few-shot", "base-zero-shot"])] == ["base-few-shot"]
    with pytest.raises(ValueError, match=r"unknown eval method 'zero-shot'\. Did you mean"):
        plan_methods(pol, ["zero-shot"])  # an old name is no name on the command line
    assert method_of("zero-shot").id == "base-few-shot"  # results written before the rename


def test_a_cached_sample_is_keyed_by_the_wording_of_the_worked_examples() -> None:
    """The same turn under another channel's wording renders other worked examples: another sample."""
    from agon_env.evaluation.cache import observation_key

    obs = {"text": "t", "problem": "p", "draft": "d", "role": 1, "own": 0, "words": "challenger_text"}
    assert observation_key("a", obs, 3) == observation_key("a", dict(obs), 3)
    assert observation_key("a", obs, 3) != observation_key("a", {**obs, "words": "trace_text"}, 3)
