"""Credit-assignment laws for every algorithm plugin, over random outcome tables (hypothesis).

Each example draws, per episode, whether the draft and the challenge are right and well
formatted; scripted agents write exactly that; the laws below must hold for every plugin
and both seat assignments. Gold answers are strings no prompt contains, so finding one in
an observation can only be a leak.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agon_env
from agon_env.agents.scripted import ScriptedAgent
from agon_env.algorithms.registry import algorithm_names, get_algorithm
from agon_env.algorithms.rollout import rollout

B, N = 2, 3
PROBLEMS = [{"question": f"Problem {i}: what is the secret?", "answer": f"GOLD{i}x"} for i in range(B)]
LAM = 0.5
CHALLENGER_TERM = {
    "conversion": lambda ca, cb: 2 * cb + cb * (1 - ca),
    "coop": lambda ca, cb: 2 * cb,
    "margin": lambda ca, cb: 3 * cb - ca,
}

outcome = st.tuples(st.booleans(), st.booleans())  # (right, well formatted)
tables = st.lists(st.tuples(outcome, outcome), min_size=B * N, max_size=B * N)


def text(problem: int, right: bool, formatted: bool, tag: str) -> str:
    answer = f"GOLD{problem}x" if right else "nope"
    summary = f"<summary>{tag} reasoning</summary>" if formatted else ""
    return f"{tag} thinking. {summary}<answer>{answer}</answer>"


def play(name: str, step: int, table):
    plugin = get_algorithm(name)
    env = agon_env.make(
        "agon/math-v0",
        problems=PROBLEMS,
        mode=plugin.env_mode,
        reward_scheme=plugin.reward_scheme,
        exchange=plugin.exchange or "summary",
    )
    seats = plugin.seats(step)
    drafts = [text(i // N, *d, tag=f"D{i}") for i, (d, _) in enumerate(table)]
    challenges = [text(i // N, *c, tag=f"C{i}") for i, (_, c) in enumerate(table)]
    script = {s: [] for s in plugin.adapters}
    script[seats["drafter"]] += drafts
    script[seats["challenger"]] += challenges  # one seat plays both turns in self mode
    seen: dict[str, list] = {s: [] for s in plugin.adapters}

    def agent(seat):
        queue = list(script[seat])

        def answer(obs):
            seen[seat].append(obs)
            return queue.pop(0)

        return ScriptedAgent(seat, answer)

    agents = {s: agent(s) for s in plugin.adapters}
    return plugin, seats, rollout(env, agents, list(range(B)), N, drafter=seats["drafter"]), seen


settings_ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", algorithm_names())
@settings_
@given(table=tables, step=st.integers(0, 3))
def test_rewards_are_the_schemes_and_groups_are_one_problem_and_role(name, step, table):
    plugin, seats, batch, _ = play(name, step, table)
    for role in plugin.trained_roles:
        stream = batch.stream(role)
        assert len(stream) == B * N
        for i, t in enumerate(stream):
            # A group is one problem × one role: rollout i // N of problem i // N.
            assert t.role == role and batch.episodes[t.episode].problem_index == i // N == t.episode // N
            assert t.seat == seats[role]
    for i, ((da, fa), (cb, fb)) in enumerate(table):
        ep = batch.episodes[i]
        assert ep.draft.reward == 2 * da + LAM * fa  # the drafter's reward has no rival term
        if plugin.env_mode == "solo":
            assert ep.challenge is None
            continue
        # The bonus (or margin) is against this challenge's *own paired* draft, episode i.
        assert ep.challenge.reward == CHALLENGER_TERM[plugin.reward_scheme](da, cb) + LAM * fb


ALTERNATING = [n for n in algorithm_names() if get_algorithm(n).drafter(0) != get_algorithm(n).drafter(1)]


@pytest.mark.parametrize("name", ALTERNATING)
@settings_
@given(table=tables)
def test_swapping_the_drafting_seat_mirrors_the_rewards(name, table):
    assert get_algorithm(name).drafter(0) == "agent_a"
    _, _, a_drafts, _ = play(name, 0, table)
    _, _, b_drafts, _ = play(name, 1, table)
    for x, y in zip(a_drafts.turns, b_drafts.turns, strict=True):
        assert (x.role, x.reward, x.correct) == (y.role, y.reward, y.correct)
        assert {x.seat, y.seat} == {"agent_a", "agent_b"}


@pytest.mark.parametrize("name", algorithm_names())
@settings_
@given(table=tables, step=st.integers(0, 1))
def test_no_observation_holds_gold_and_the_none_channel_shows_no_draft(name, step, table):
    plugin, _, batch, seen = play(name, step, table)
    for observations in seen.values():
        for obs in observations:
            blob = " ".join(str(v) for v in obs.values())
            assert "GOLD" not in blob, "an observation holds a gold answer"
            assert "thinking" not in blob, "an observation holds a draft's reasoning"
    for t in batch.stream("challenger") if plugin.env_mode != "solo" else []:
        i = t.episode
        if plugin.exchange == "none":
            assert t.observation["draft"] == "" and f"D{i}" not in t.observation["text"]
        else:
            formatted = table[i][0][1]
            assert (f"D{i} reasoning" in t.observation["draft"]) == formatted
            assert t.draft_unusable == (not formatted)


@pytest.mark.parametrize("name", ["agon", "hidden-draft", "self-refine"])
def test_no_observation_of_a_code_task_holds_its_hidden_tests(name):
    plugin = get_algorithm(name)
    env = agon_env.make(
        "agon/humaneval-v0", limit=3, mode=plugin.env_mode, reward_scheme=plugin.reward_scheme
    )
    tests = [line.strip() for p in env.task for t in p.answer["tests"] for line in t.splitlines()]
    tests = [t for t in tests if t.startswith("assert")]
    assert tests, "the fixture must have hidden asserts to look for"
    seen: list = []

    def answer(obs):
        seen.append(obs)
        return "<summary>a plan</summary><answer>def f():\n    pass</answer>"

    agents = {s: ScriptedAgent(s, answer) for s in plugin.adapters}
    rollout(env, agents, [0, 1, 2], 1, drafter=plugin.seats(0)["drafter"])
    blob = "\n".join(str(v) for obs in seen for v in obs.values())
    assert seen and not any(t in blob for t in tests)
