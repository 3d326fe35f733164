"""Every exchange channel under the two-seat plugins' scripted batch: same rewards, its own view."""

from __future__ import annotations

import pytest
from algo_helpers import CHALLENGES, DRAFTS, PROBLEMS, scripted

import agon_env
from agon_env.algorithms.registry import get_algorithm
from agon_env.algorithms.rollout import rollout
from agon_env.envs.exchange import CHANNELS
from agon_env.vocabulary import draft_handle

CONVERSION = [2.5, 3.5, 0.0, 2.0]  # test_plugins.CHALLENGER["conversion"]: rewards never read the view


@pytest.mark.parametrize("exchange", list(CHANNELS))
@pytest.mark.parametrize("algo", ["agon", "fixed-roles", "self-refine"])
def test_each_channel_changes_only_what_the_challenger_reads(algo, exchange):
    plugin = get_algorithm(algo)
    env = agon_env.make("agon/math-v0", problems=PROBLEMS, mode=plugin.env_mode, exchange=exchange)
    seats = plugin.seats(0)
    script = {s: [] for s in plugin.adapters}
    script[seats["drafter"]] += DRAFTS
    script[seats["challenger"]] += CHALLENGES
    agents, seen = {}, {}
    for s, texts in script.items():
        agents[s], seen[s] = scripted(s, texts)
    batch = rollout(env, agents, [0, 1], 2, drafter=seats["drafter"])
    assert batch.rewards("challenger").flatten().tolist() == CONVERSION
    reads = [o for o in seen[seats["challenger"]] if o["role"] == 1]
    for i, obs in enumerate(reads):
        summary = DRAFTS[i].split("<summary>")[1].split("</summary>")[0]
        answer = DRAFTS[i].split("<answer>")[1].split("</answer>")[0]
        assert (summary in obs["text"]) == CHANNELS[exchange].text
        assert answer not in obs["text"]
        if CHANNELS[exchange].cache:  # a hex digest, whose digits are no answer
            assert obs["draft"] == draft_handle(PROBLEMS[i // 2]["question"], DRAFTS[i])
        else:
            assert answer not in obs["draft"]
