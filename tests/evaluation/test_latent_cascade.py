"""``agon eval``'s cascades and the exchange: the run's channel, and the latent cascade on the tiny model."""

from __future__ import annotations

import pytest

from agon_env.agents import HFBackend, LLMAgent
from agon_env.agents.adapters import LoraSpec, SharedBase
from agon_env.agents.protocol import SamplingParams
from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.methods import DEFAULT_METHODS, METHODS, Policies, plan_methods
from agon_env.evaluation.splits import load_eval_data
from agon_env.options import LatentConfig
from agon_env.vocabulary import REFERENCE, is_handle


@pytest.fixture(scope="module")
def setup():
    base = SharedBase.from_source("tiny")
    base.add_adapter("agent_a", LoraSpec(init_seed=1, init_b_std=0.05))
    base.add_adapter("agent_b", LoraSpec(init_seed=2, init_b_std=0.05))
    backend, sp = HFBackend(base), SamplingParams(temperature=1.0, max_new_tokens=6)
    agents = {
        n: LLMAgent(n, base, adapter=n if n != "base" else REFERENCE, backend=backend, sampling=sp)
        for n in ("base", "agent_a", "agent_b")
    }
    data = load_eval_data("agon/arith-v0", {"difficulty": 1}, problems=4, val_problems=2, seed=0)
    return agents, data


def _policies(agents, **kw):
    return Policies("run", agents["base"], {n: agents[n] for n in ("agent_a", "agent_b")}, **kw)


def test_the_latent_cascade_is_a_row_run_only_when_asked():
    assert METHODS["latent-cascade"].exchange == "latent" and "latent-cascade" not in DEFAULT_METHODS
    assert METHODS["cascade"].exchange is None  # the run's channel
    assert METHODS["moa"].exchange == "summary"  # the base's rows are the same in every run


def test_the_latent_cascade_runs_on_the_standalone_drafts(setup):
    agents, data = setup
    pol = _policies(agents, latent=LatentConfig(span="completion"))
    res = Evaluator(data, methods=["standalone", "latent-cascade"], blind_spots=False).evaluate(pol)
    for x, y in (("agent_a", "agent_b"), ("agent_b", "agent_a")):
        latent = res["methods"][f"latent-cascade:{x}>{y}"]
        alone = {e["problem_id"]: e["correct"] for e in res["methods"][f"standalone:{x}"]["episodes"]}
        # The same problems, and the drafts are the standalone samples (served by the sample cache).
        assert {e["problem_id"]: e["first_correct"] for e in latent["episodes"]} == alone
    method = next(m for m in plan_methods(pol, ["latent-cascade"]))
    eps = Evaluator(data)._run(method, pol, data.test, [0])[0]
    assert all(is_handle(e.challenge.draft) for e in eps)
    assert all("latent_prefix" not in e.challenge.completion.meta for e in eps)  # eval keeps no caches


def test_the_cascade_reads_the_draft_as_the_run_exchanged_it(setup):
    agents, data = setup
    method = next(m for m in plan_methods(_policies(agents), ["cascade"]))
    for exchange, shown in (
        ("none", lambda d: d == ""),
        ("latent", is_handle),
        (None, lambda d: d and not is_handle(d)),
    ):
        eps = Evaluator(data)._run(method, _policies(agents, exchange=exchange), data.test, [0])[0]
        assert all(shown(e.challenge.draft) for e in eps), exchange


def test_a_latent_cascade_on_empty_caches_read_no_draft(setup):
    """Issue 41: the tiny model writes no ``<summary>``, so with the default span every latent
    challenger reads an empty cache: all unusable (eval.json's turns too), and no summary leak
    measured on a cache (``None``, shown "–")."""
    agents, data = setup
    res = Evaluator(data, methods=["latent-cascade"], blind_spots=False).evaluate(
        _policies(agents, latent=LatentConfig())
    )
    rows = [m for k, m in res["methods"].items() if k.startswith("latent-cascade:")]
    assert rows and all(m["draft_unusable"] == 1.0 and m["summary_leak"] is None for m in rows)
    assert all(e["turns"][1]["draft_unusable"] for m in rows for e in m["episodes"])
