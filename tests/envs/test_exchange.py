"""The exchange channels: what each shows the challenger, today's names, and conformance."""

from __future__ import annotations

import pytest

import agon_env
from agon_env.conformance import check_env
from agon_env.envs.exchange import CHANNELS, NO_SUMMARY
from agon_env.envs.tasks.verify import REDACTED
from agon_env.vocabulary import draft_handle, is_handle

DRAFT = "Six sevens: 6*7 = 42. <summary>Multiplied; the result is 42.</summary><answer>42</answer>"
PROBLEMS = [{"question": "What is 6 * 7?", "answer": "42"}]


def _challenger_obs(**kwargs):
    env = agon_env.make("agon/math-v0", problems=PROBLEMS, **kwargs)
    env.reset(seed=0)
    env.step(DRAFT)
    return env, env.observe(env.agent_selection)


@pytest.mark.parametrize("exchange", list(CHANNELS))
def test_every_channel_passes_check_env(exchange):
    report = check_env("agon/arith-v0", num_cycles=10, seed_cycles=10, max_problems=20, exchange=exchange)
    assert report.problems_checked == 20


def test_each_channel_shows_what_its_row_says():
    shown = {name: _challenger_obs(exchange=name)[1] for name in CHANNELS}
    assert shown["summary"]["draft"] == "Multiplied; the result is 42."
    assert shown["redacted"]["draft"] == f"Multiplied; the result is {REDACTED}."
    assert (
        shown["trace"]["draft"].startswith("Six sevens: 6*7 = 42.")
        and "<answer>" not in shown["trace"]["draft"]
    )
    assert "<summary>Multiplied" in shown["trace"]["draft"]
    assert shown["none"]["draft"] == "" and shown["none"]["text"] == PROBLEMS[0]["question"]
    latent = shown["latent"]
    assert latent["draft"] == draft_handle(PROBLEMS[0]["question"], DRAFT) and is_handle(latent["draft"])
    assert "Multiplied" not in latent["text"] and "42" not in latent["text"] and latent["role"] == 1
    for name, obs in shown.items():
        assert "<answer>42</answer>" not in obs["text"], name


def test_what_the_results_record_per_channel():
    for name, leak in (("summary", True), ("redacted", False), ("latent", False), ("none", False)):
        env, _ = _challenger_obs(exchange=name)
        env.step("<summary>checked</summary><answer>42</answer>")
        challenge = env.results[1]
        assert challenge.summary_leak is leak, name  # a handle or nothing states no result
        assert not challenge.draft_unusable
        # ... but only shown text is measured: a cache or nothing reports no leak figure at all.
        measured = name in ("summary", "redacted")
        assert challenge.leak_measured is measured, name
        assert challenge.outcome()["summary_leak"] == (leak if measured else None), name


def test_a_trace_without_text_is_unusable_and_handles_differ_per_draft():
    env = agon_env.make("agon/math-v0", problems=PROBLEMS, exchange="trace")
    env.reset(seed=0)
    env.step("<answer>42</answer>")
    assert env.observe(env.agent_selection)["draft"] == NO_SUMMARY
    assert draft_handle("q", "a") != draft_handle("q", "b") != draft_handle("p", "b")


def test_the_default_channel_is_the_summary_and_old_names_are_unknown():
    assert _challenger_obs()[0].channel.name == "summary"
    with pytest.raises(ValueError, match="unknown exchange"):
        agon_env.make("agon/arith-v0", exchange="telepathy")
    with pytest.raises(ValueError, match="mode = 'hidden': unknown mode"):  # exchange="none" replaced it
        agon_env.make("agon/arith-v0", mode="hidden")
    with pytest.raises(TypeError, match="redact_answer"):  # exchange="redacted" replaced it
        agon_env.make("agon/arith-v0", redact_answer=True)


def test_spawned_copies_keep_the_channel():
    env = agon_env.make("agon/arith-v0", exchange="latent")
    assert env.unwrapped.spawn().exchange == "latent"
    assert agon_env.make("agon/arith-v0", exchange="redacted").unwrapped.spawn().exchange == "redacted"


def test_self_mode_reads_its_own_draft_in_any_channel():
    _, obs = _challenger_obs(mode="self", exchange="latent")
    assert obs["own"] == 1 and is_handle(obs["draft"]) and "Your own earlier draft" in obs["text"]
