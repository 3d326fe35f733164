"""Each plugin on a scripted batch: who plays what, rewards per stream, advantages, metrics."""

from __future__ import annotations

import math

import pytest
import torch
from algo_helpers import CHALLENGES, DRAFTS, PROBLEMS, scripted

import agon_env
from agon_env.algorithms.grpo import ADV_EPS, group_advantages
from agon_env.algorithms.metrics import rollout_metrics
from agon_env.algorithms.registry import AlgorithmPlugin, algorithm_names, get_algorithm, register_algorithm
from agon_env.algorithms.rollout import rollout

A = 1 / (math.sqrt(2) + ADV_EPS)  # N = 2: sample std of (x, y) is |x - y| / √2, so A = ±1/√2

# Challenger rewards of the four scripted episodes, by hand from the scheme table
# (c_a, c_b, φ_b) = (1,1,1), (0,1,1), (1,0,0), (1,1,0):
CHALLENGER = {
    "conversion": [2 + 0 + 0.5, 2 + 1 + 0.5, 0.0, 2 + 0 + 0.0],  # 2c_b + c_b(1-c_a) + λφ_b
    "coop": [2.5, 2.5, 0.0, 2.0],  # 2c_b + λφ_b
    "margin": [3 - 1 + 0.5, 3 - 0 + 0.5, 0 - 1 + 0.0, 3 - 1 + 0.0],  # 3c_b - c_a + λφ_b
}
DRAFTER = [2.5, 0.5, 2.5, 2.5]  # 2c_a + λφ_a under every scheme

EXPECTED = {
    # algo: (mode, adapters, drafter at steps 0 and 1, challenger rewards or None)
    "grpo": ("solo", ("agent_a",), ("agent_a", "agent_a"), None),
    "agon": ("challenge", ("agent_a", "agent_b"), ("agent_a", "agent_b"), "conversion"),
    "coop": ("challenge", ("agent_a", "agent_b"), ("agent_a", "agent_b"), "coop"),
    "margin": ("challenge", ("agent_a", "agent_b"), ("agent_a", "agent_b"), "margin"),
    "fixed-roles": ("challenge", ("agent_a", "agent_b"), ("agent_a", "agent_a"), "conversion"),
    "self-refine": ("self", ("agent_a",), ("agent_a", "agent_a"), "conversion"),
    "hidden-draft": ("challenge", ("agent_a", "agent_b"), ("agent_a", "agent_b"), "conversion"),
}


def test_every_plugin_is_covered():
    assert sorted(EXPECTED) == algorithm_names()


def _play(plugin: AlgorithmPlugin, step: int):
    env = agon_env.make(
        "agon/math-v0",
        problems=PROBLEMS,
        mode=plugin.env_mode,
        reward_scheme=plugin.reward_scheme,
        exchange=plugin.exchange or "summary",
    )
    seats = plugin.seats(step)
    script = {s: [] for s in plugin.adapters}
    script[seats["drafter"]] += DRAFTS
    script[seats["challenger"]] += CHALLENGES  # the same seat twice in self mode: drafts, then these
    agents, seen = {}, {}
    for s, texts in script.items():
        agents[s], seen[s] = scripted(s, texts)
    batch = rollout(env, agents, [0, 1], 2, drafter=seats["drafter"])
    return batch, {s: [o for o in obs if o["role"] == 1] for s, obs in seen.items()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("step", [0, 1])
def test_plugin_scripted_batch(name, step):
    mode, adapters, drafters, scheme = EXPECTED[name]
    plugin = get_algorithm(name)
    assert (plugin.env_mode, plugin.adapters) == (mode, adapters)
    assert plugin.drafter(step) == drafters[step]
    batch, seen = _play(plugin, step)
    updates = plugin.updates(step)

    # drafter stream: N drafts per problem, plain GRPO rewards; group 1 (2.5, 2.5) is dropped
    assert updates["drafter"] == drafters[step]
    assert batch.rewards("drafter").flatten().tolist() == DRAFTER
    adv, keep = group_advantages(batch.rewards("drafter"))
    assert keep.tolist() == [True, False]
    assert adv.flatten().tolist() == pytest.approx([A, -A, 0, 0], rel=1e-5)

    if scheme is None:
        assert set(updates) == {"drafter"}
        assert all(t.role == "drafter" for t in batch.turns)
        return
    # challenger stream: each challenge paired with its own draft (episode i reads draft i)
    seat = plugin.seats(step)["challenger"]
    assert updates["challenger"] == seat
    assert seat == (
        drafters[step] if len(adapters) == 1 else ({"agent_a", "agent_b"} - {drafters[step]}).pop()
    )
    assert batch.rewards("challenger").flatten().tolist() == CHALLENGER[scheme]
    assert len(seen[seat]) == 4
    for i, obs in enumerate(seen[seat]):
        assert obs["role"] == 1
        summary = DRAFTS[i].split("<summary>")[1].split("</summary>")[0]
        answer = DRAFTS[i].split("<answer>")[1].split("</answer>")[0]
        assert (summary in obs["text"]) == (plugin.exchange != "none")
        # The summaries do not state their answers, so the answer can only arrive by a leak
        # of the draft beyond its summary (this fails if the env shows the whole draft).
        assert answer not in obs["text"] and answer not in obs["draft"]
    adv, keep = group_advantages(batch.rewards("challenger"), "mean")
    expected_keep = {"conversion": [True, True], "coop": [False, True], "margin": [True, True]}[scheme]
    assert keep.tolist() == expected_keep
    by_hand = {
        "conversion": [-0.5, 0.5, -1.0, 1.0],  # r - mean per group: (2.5, 3.5) and (0, 2)
        "coop": [0.0, 0.0, -1.0, 1.0],  # (2.5, 2.5) has no variance: dropped
        "margin": [-0.5, 0.5, -1.5, 1.5],  # (2.5, 3.5) and (-1, 2)
    }[scheme]
    assert adv.flatten().tolist() == pytest.approx(by_hand)


def test_scripted_metrics_agon():
    batch, _ = _play(get_algorithm("agon"), 0)
    m = rollout_metrics(batch)
    # drafts: right, wrong, right, right; challenges: right, right, wrong, right
    assert m["acc/agent_a/drafter"] == pytest.approx(0.75)
    assert m["acc/agent_b/challenger"] == pytest.approx(0.75)
    assert m["format/agent_b/challenger"] == pytest.approx(0.5)
    assert m["conversion_rate"] == pytest.approx(1.0)  # the one wrong draft was converted
    assert m["win_rate/agent_a"] == pytest.approx(0.25)  # episode 2
    assert m["win_rate/agent_b"] == pytest.approx(0.25)  # episode 1
    assert m["tie_rate"] == pytest.approx(0.5)
    # Of the challenges with both answers (4/4, 5/4, 6/6; 6 vs none left out), one changed the answer.
    assert m["divergence/challenge_changed_answer"] == pytest.approx(1 / 3)
    assert m["reward/challenger"] == pytest.approx(sum(CHALLENGER["conversion"]) / 4)


def test_self_refine_metrics_use_each_turns_own_info():
    batch, _ = _play(get_algorithm("self-refine"), 0)
    m = rollout_metrics(batch)
    assert m["acc/agent_a/drafter"] == pytest.approx(0.75)
    assert m["acc/agent_a/challenger"] == pytest.approx(0.75)
    assert "win_rate/agent_a" not in m  # one seat: nobody to beat


def test_unknown_algorithm_suggests():
    with pytest.raises(ValueError, match="Did you mean 'agon'"):
        get_algorithm("agn")


def test_register_and_validate_plugins():
    with pytest.raises(ValueError, match="already registered"):
        register_algorithm(get_algorithm("agon"))
    with pytest.raises(ValueError, match="role_schedule"):
        AlgorithmPlugin(name="x", summary="", env_mode="challenge", role_schedule="random")
    with pytest.raises(ValueError, match="trained_roles"):
        AlgorithmPlugin(name="x", summary="", env_mode="challenge", trained_roles=("judge",))


def test_rewards_shape_is_checked():
    batch, _ = _play(get_algorithm("grpo"), 0)
    with pytest.raises(ValueError, match="not B×N"):
        batch.rewards("challenger")
    assert torch.equal(batch.rewards("drafter"), torch.tensor([[2.5, 0.5], [2.5, 2.5]]))
