"""play_episodes: lockstep batching, per-turn seeds, typed results in start order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import agon_env
from agon_env.agents.protocol import Completion
from agon_env.episodes import Start, play_episodes

PROBLEMS = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(5)]


class Echo:
    """Answers the gold of its problem (+ ``off``) and records every call's observations and seeds."""

    def __init__(self, name: str, off: int = 0) -> None:
        self.name, self.off = name, off
        self.calls: list[tuple[list[Mapping[str, Any]], list[int] | None]] = []

    def act(self, observations: Sequence[Mapping[str, Any]], *, seeds: Sequence[int] | None = None):
        self.calls.append((list(observations), None if seeds is None else list(seeds)))
        out = []
        for o in observations:
            n = int(o["problem"].split()[2]) + 1 + self.off
            out.append(Completion(f"<summary>got {n}</summary><answer>{n}</answer>", completion_ids=[1, 2]))
        return out


def env(mode: str = "challenge"):
    return agon_env.make("agon/math-v0", problems=PROBLEMS, mode=mode)


def test_one_call_per_seat_per_stage_and_typed_results_in_order():
    a, b = Echo("a", off=1), Echo("b")
    starts = [Start(i, "agent_a", seed=i) for i in (3, 0, 4)]
    played = play_episodes(env(), {"agent_a": a, "agent_b": b}, starts, lambda i, seat, turn: 100 * i + turn)
    assert [len(c[0]) for c in a.calls] == [3] and [len(c[0]) for c in b.calls] == [3]
    assert [e.problem_index for e in played.episodes] == [3, 0, 4]
    for e in played.episodes:
        d, c = e.turns
        assert (d.seat, d.role, d.correct) == ("agent_a", "drafter", False)
        assert (c.seat, c.role, c.correct, c.reward) == ("agent_b", "challenger", True, 3.5)
        assert c.completion.completion_ids == [1, 2] and c.tokens == 2 and e.tokens == 4
        assert c.observation["draft"] == f"got {e.problem_index + 2}" and e.correct and not e.first_correct
    # Seeds are (episode, turn): the drafter's turn 0, the challenger's turn 1.
    assert a.calls[0][1] == [0, 100, 200] and b.calls[0][1] == [1, 101, 201]


def test_self_mode_one_seat_plays_both_turns_and_solo_one():
    a = Echo("a")
    played = play_episodes(env("self"), {"agent_a": a}, [Start(1, "agent_a", 0)])
    (e,) = played.episodes
    assert [t.role for t in e.turns] == ["drafter", "challenger"] and len(a.calls) == 2
    assert a.calls[0][1] is None  # no seed function: agents sample unseeded
    solo = play_episodes(env("solo"), {"agent_a": a}, [Start(1, "agent_a", 0)]).episodes[0]
    assert [t.role for t in solo.turns] == ["drafter"] and solo.challenge is None


def test_a_missing_seat_or_a_short_answer_fails_clearly():
    with pytest.raises(KeyError, match="agent_b"):
        play_episodes(env(), {"agent_a": Echo("a")}, [Start(0, "agent_a", 0)])

    class Short(Echo):
        def act(self, observations, *, seeds=None):
            return super().act(observations, seeds=seeds)[:-1]

    with pytest.raises(ValueError, match="returned 1 actions for 2"):
        play_episodes(env("solo"), {"agent_a": Short("s")}, [Start(0, "agent_a", 0), Start(1, "agent_a", 0)])
