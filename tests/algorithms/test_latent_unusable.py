"""A latent challenge whose draft had no span read nothing: it is counted so (issue 41)."""

from __future__ import annotations

import pytest
from algo_helpers import scripted


def test_a_latent_challenge_on_an_empty_cache_read_no_draft():
    """Issue 41: the latent channel shows every challenger a handle, but a draft with no span
    gives an empty cache (``latent_tokens`` 0 on the completion): that challenge read nothing. It
    counts as ``draft_unusable`` and stays out of "challenge changed answer"; ``summary_leak`` is
    not measured on a cache (absent, not 0)."""
    import agon_env
    from agon_env.algorithms.metrics import rollout_metrics
    from agon_env.algorithms.registry import get_algorithm
    from agon_env.algorithms.rollout import rollout
    from agon_env.metric_names import CHALLENGE_CHANGED_ANSWER, DRAFT_UNUSABLE, SUMMARY_LEAK

    problems = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 3 + 3?", "answer": "6"}]
    drafts = [
        "<summary>added</summary><answer>4</answer>",
        "<answer>5</answer>",
        "<summary>6</summary><answer>6</answer>",
    ]
    challenges = ["<answer>4</answer>", "<answer>4</answer>", "<answer>7</answer>"]
    cached = iter([5, 0, 5])  # tokens of cache each challenger read: the second draft had no summary

    class Reader:
        """The scripted challenger, reporting what a LatentAgent reports of the cache it read."""

        def __init__(self, name: str) -> None:
            self.name, self.inner = name, scripted(name, challenges)[0]

        def act(self, observations, *, seeds=None):
            out = self.inner.act(observations, seeds=seeds)
            for c in out:
                c.meta["latent_tokens"] = next(cached)
            return out

    plugin = get_algorithm("agon")
    env = agon_env.make("agon/math-v0", problems=problems, mode=plugin.env_mode, exchange="latent")
    seats = plugin.seats(0)
    agents = {
        seats["drafter"]: scripted(seats["drafter"], drafts)[0],
        seats["challenger"]: Reader(seats["challenger"]),
    }
    batch = rollout(env, agents, [0, 1, 0], 1, drafter=seats["drafter"])
    assert [e.challenge.draft_unusable for e in batch.episodes] == [False, True, False]
    m = rollout_metrics(batch)
    assert m[DRAFT_UNUSABLE] == pytest.approx(1 / 3)
    assert m[CHALLENGE_CHANGED_ANSWER] == pytest.approx(1 / 2)  # 4→4 and 6→7; 5→4 read nothing
    # The counts behind the shares are logged too (the start-vs-end table pools them).
    assert (m["successes/draft_unusable"], m["trials/draft_unusable"]) == (1.0, 3.0)
    assert (m[f"successes/{CHALLENGE_CHANGED_ANSWER}"], m[f"trials/{CHALLENGE_CHANGED_ANSWER}"]) == (1.0, 2.0)
    assert SUMMARY_LEAK not in m
