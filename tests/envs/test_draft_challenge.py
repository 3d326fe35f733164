import re
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agon_env
from agon_env.envs.draft_challenge import DraftChallengeEnv, TurnResult
from agon_env.envs.exchange import NO_SUMMARY, shown_draft
from agon_env.envs.tasks.base import ListTask, Problem
from agon_env.vocabulary import challenger_text

PROBLEMS = [
    {"question": "What is 17 + 25?", "answer": "42"},
    {"question": "What is 2^{10}?", "answer": "1024"},
]


def fmt(answer: str, summary: str = "I added the tens and the units.", reasoning: str = "Thinking.") -> str:
    return f"{reasoning} <summary>{summary}</summary> <answer>{answer}</answer>"


def play(env, actions: list, seed: int = 0, **options):
    """Run one episode; ``actions`` are consumed in turn order. Returns final rewards/infos."""
    env.reset(seed=seed, options={"problem_index": 0, **options})
    seen_obs, rewards, infos = [], {}, {}
    acts = iter(actions)
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        if term or trunc:
            rewards[agent], infos[agent] = reward, info
            env.step(None)
        else:
            seen_obs.append((agent, obs))
            env.step(next(acts))
    return seen_obs, rewards, infos


def make(**kw) -> DraftChallengeEnv:
    return agon_env.make("agon/math-v0", problems=PROBLEMS, **kw)


def test_wrong_draft_right_challenge_gives_3_5_and_0_5():
    obs, rewards, infos = play(make(), [fmt("41", reasoning="SECRET-REASONING"), fmt("42")])
    assert rewards == {"agent_a": 0.5, "agent_b": 3.5}
    challenger_obs = obs[1][1]
    assert obs[1][0] == "agent_b" and challenger_obs["role"] == 1
    assert "I added the tens and the units." in challenger_obs["text"]
    assert "41" not in challenger_obs["text"] and "SECRET-REASONING" not in challenger_obs["text"]
    assert infos["agent_b"]["correct"] and not infos["agent_a"]["correct"]
    assert infos["agent_a"]["role"] == "drafter" and infos["agent_b"]["role"] == "challenger"
    assert set(infos["agent_a"]) >= {"role", "correct", "format_ok", "chars", "tokens", "problem_id", "task"}


def test_both_right_give_2_5_each_and_drafter_option():
    obs, rewards, _ = play(make(), [fmt("42"), fmt("42")], drafter="agent_b")
    assert obs[0][0] == "agent_b" and obs[0][1]["role"] == 0 and obs[0][1]["draft"] == ""
    assert rewards == {"agent_a": 2.5, "agent_b": 2.5}


@pytest.mark.parametrize("scheme,expected", [("coop", 2.5), ("margin", 3.5), ("conversion", 3.5)])
def test_reward_scheme_kwarg(scheme, expected):
    _, rewards, _ = play(make(reward_scheme=scheme), [fmt("41"), fmt("42")])
    assert rewards["agent_b"] == expected


def test_answer_tags_inside_a_summary_never_reach_the_challenger():
    # A stray closer inside the summary survives parsing: the challenger reads up to it (every
    # channel reads a draft up to its first answer tag, agon_env.blocks.given).
    obs, _, _ = play(make(), [fmt("41", summary="see </answer> here </ANSWER>"), fmt("42")])
    shown = obs[1][1]
    assert shown["draft"] == "see" and "answer>" not in shown["text"].lower()
    # A pasted complete block nests tags: the parser drops that summary, so nothing of it is shown.
    obs, _, _ = play(make(), [fmt("41", summary="see <answer>41</answer> here"), fmt("42")])
    assert obs[1][1]["draft"] == NO_SUMMARY and "41" not in obs[1][1]["text"]
    # The rule itself, on a whole completion.
    assert shown_draft("<summary>x y </ANSWER> z</summary> <answer>41</answer>") == "x y"


@dataclass
class FakeCompletion:
    text: str
    num_tokens: int


def test_token_counts_and_length_tiebreak():
    env = make(gamma=0.5)
    _, rewards, infos = play(env, [FakeCompletion(fmt("42"), 30), FakeCompletion(fmt("42"), 12)])
    assert rewards == {"agent_a": 2.5, "agent_b": 3.0}
    assert infos["agent_b"]["tokens"] == 12 and infos["agent_a"]["tokens"] == 30


def test_solo_mode_is_one_seat_plain_grpo():
    env = make(mode="solo")
    obs, rewards, infos = play(env, [fmt("42")])
    assert [a for a, _ in obs] == ["agent_a"] and rewards == {"agent_a": 2.5}
    assert infos["agent_a"]["rewards_by_role"] == {"drafter": 2.5}


def test_self_mode_reads_own_draft_and_sums_rewards():
    obs, rewards, infos = play(make(mode="self"), [fmt("41", summary="MY-OWN-SUMMARY"), fmt("42")])
    assert [(a, o["role"]) for a, o in obs] == [("agent_a", 0), ("agent_a", 1)]
    assert "MY-OWN-SUMMARY" in obs[1][1]["text"]
    assert infos["agent_a"]["rewards_by_role"] == {"drafter": 0.5, "challenger": 3.5}
    assert rewards["agent_a"] == 4.0
    assert [t["correct"] for t in infos["agent_a"]["turns"]] == [False, True]


def test_the_none_channel_scores_against_an_unseen_draft():
    obs, rewards, _ = play(make(exchange="none"), [fmt("41", summary="HIDDEN"), fmt("42")])
    assert obs[1][1]["draft"] == "" and "HIDDEN" not in obs[1][1]["text"]
    assert obs[1][1]["text"] == PROBLEMS[0]["question"]
    assert rewards == {"agent_a": 0.5, "agent_b": 3.5}  # the conversion bonus still applies


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "x" * 1_000_000,  # outside the action space: scored as empty (with a warning)
        "<answer>42",
        "<summary><summary>a</summary></summary><answer>42</answer>",
        "数学 ∫ 😀",
    ],
)
def test_bad_completions_are_scored_not_crashed(bad):
    _, rewards, infos = play(make(), [bad, bad])
    assert not infos["agent_a"]["format_ok"]
    assert rewards["agent_a"] in (0.0, 2.0)


def test_several_answer_blocks_score_last_with_format_zero():
    _, rewards, infos = play(make(), ["<summary>s</summary><answer>1</answer><answer>42</answer>", fmt("42")])
    assert infos["agent_a"]["correct"] and not infos["agent_a"]["format_ok"] and rewards["agent_a"] == 2.0


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="unknown mode"):
        make(mode="duel")
    with pytest.raises(ValueError, match="unknown reward_scheme"):
        make(reward_scheme="zero-sum")
    env = make()
    with pytest.raises(ValueError, match="drafter"):
        env.reset(options={"drafter": "agent_c"})
    with pytest.raises(IndexError, match="out of range"):
        env.reset(options={"problem_index": 99})
    env.reset()
    with pytest.raises(TypeError, match="str"):
        env.step(12345)


def test_seeded_problem_choice_and_spawn():
    env = agon_env.make("agon/arith-v0")
    picks = []
    for _ in range(2):
        env.reset(seed=7)
        picks.append(env.problem.id)
    assert picks[0] == picks[1]
    twin = env.spawn()
    assert twin.task is env.task and twin.mode == env.mode


def test_render_ansi():
    env = make(render_mode="ansi")
    play(env, [fmt("41"), fmt("42")])
    out = env.render()
    assert "challenger agent_b: correct=True" in out and "rewards" in out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(["challenge", "solo", "self"]),
    exchange=st.sampled_from(["summary", "none"]),
    scheme=st.sampled_from(["conversion", "coop", "margin"]),
    seed=st.integers(0, 2**16),
)
def test_fuzz_env_with_sampled_actions(mode, exchange, scheme, seed):
    env = agon_env.make("agon/arith-v0", mode=mode, exchange=exchange, reward_scheme=scheme)
    env.reset(seed=seed)
    space = env.action_space("agent_a")
    space.seed(seed)
    steps = 0
    for agent in env.agent_iter(max_iter=10):
        obs, _r, term, trunc, _info = env.last()
        assert env.observation_space(agent).contains(obs)
        env.step(None if term or trunc else space.sample())
        steps += 1
    assert not env.agents and steps in (2, 3, 4)


def test_a_draft_without_usable_summary_still_gets_a_challenge():
    # Truncated draft: no summary block. The challenger is still the challenger, told so.
    obs, rewards, infos = play(make(), ["I think it is 41 and", fmt("42")])
    challenger_obs = obs[1][1]
    assert challenger_obs["role"] == 1 and challenger_obs["draft"] == NO_SUMMARY
    assert NO_SUMMARY in challenger_obs["text"] and "verify it and re-derive" in challenger_obs["text"]
    assert infos["agent_b"]["draft_unusable"] and not infos["agent_a"]["draft_unusable"]
    assert rewards["agent_b"] == 3.5  # right after a wrong draft: the conversion bonus


def test_results_are_typed_turns_matching_infos():
    env = make()
    _, rewards, infos = play(env, [fmt("41", summary="S-41"), fmt("42")])
    draft, challenge = env.unwrapped.results
    assert isinstance(draft, TurnResult) and (draft.seat, draft.role) == ("agent_a", "drafter")
    assert (challenge.seat, challenge.role, challenge.correct, challenge.answer) == (
        "agent_b",
        "challenger",
        True,
        "42",
    )
    assert challenge.draft == "S-41" and draft.draft == ""
    assert [r.reward for r in env.unwrapped.results] == [rewards["agent_a"], rewards["agent_b"]]
    assert infos["agent_b"]["turns"] == [challenge.outcome()]


def test_the_challenger_text_is_the_one_wording_and_self_mode_says_own():
    obs, _, _ = play(make(), [fmt("41", summary="S-41"), fmt("42")])
    assert obs[1][1]["text"] == challenger_text("What is 17 + 25?", "S-41")
    assert "A rival's draft" in obs[1][1]["text"]
    obs, _, _ = play(make(mode="self"), [fmt("41", summary="S-41"), fmt("42")])
    assert obs[1][1]["text"] == challenger_text("What is 17 + 25?", "S-41", own=True)
    assert "Your own earlier draft" in obs[1][1]["text"]


@pytest.mark.parametrize(
    ("keywords", "own"),
    [({"mode": "challenge"}, 0), ({"exchange": "none"}, 0), ({"mode": "self"}, 1)],
)
def test_the_observation_says_whether_the_draft_shown_is_the_readers_own(keywords, own):
    """An agent picks its self-refinement prompts from ``own``, not by parsing ``text``."""
    env = make(**keywords)
    obs, _, _ = play(env, [fmt("41", summary="S-41"), fmt("42")])
    assert [o["own"] for _, o in obs] == [0, own]
    space = env.observation_space(obs[1][0])
    assert all(space.contains(o) for _, o in obs)


class _Broken(ListTask):
    name = "broken-scorer-in-env-test"  # warnings are once per task name per process

    def score(self, problem, answer):
        raise ZeroDivisionError("scorer bug")


def test_a_raising_scorer_is_reported_once_and_kept_on_the_turn(caplog):
    env = agon_env.make("agon/math-v0", task=_Broken([Problem("p0", "What is 1 + 1?", "2")]))
    with pytest.warns(UserWarning, match="broken-scorer-in-env-test.*score\\(\\) raised") as record:
        play(env, [fmt("2"), fmt("2")])
        _, _, infos = play(env, [fmt("2"), fmt("2")])
    assert len([w for w in record if "broken-scorer-in-env-test" in str(w.message)]) == 1  # once per task
    draft = env.unwrapped.results[0]
    assert not draft.correct and "ZeroDivisionError: scorer bug" in draft.score_error
    assert infos["agent_a"]["score_error"] is True
    _, _, _ = play(env, ["no answer at all", fmt("2")])
    assert env.unwrapped.results[0].score_error is None  # nothing to score, nothing raised


def test_summary_leak_is_measured_and_redaction_blanks_the_answer():
    leaky = fmt("41", summary="Seventeen plus 25 is 41.")
    env = make()
    obs, _, _ = play(env, [leaky, fmt("42")])
    assert (
        "41" in obs[1][1]["draft"] and env.unwrapped.results[1].summary_leak
    )  # the paper's rule lets it through
    env = make(exchange="redacted")
    obs, _, _ = play(env, [leaky, fmt("42")])
    assert "41" not in obs[1][1]["text"] and "[withheld]" in obs[1][1]["draft"]
    assert not env.unwrapped.results[1].summary_leak
    _, _, _ = play(env, [fmt("41", summary="I added the tens."), fmt("42")])
    assert not env.unwrapped.results[1].summary_leak and env.unwrapped.results[1].draft == "I added the tens."


def test_the_drafter_earns_the_tiebreak_only_when_allowed():
    short, long = FakeCompletion(fmt("42"), 10), FakeCompletion(fmt("42"), 30)
    _, rewards, _ = play(make(gamma=0.5), [short, long])
    assert rewards == {"agent_a": 2.5, "agent_b": 2.5}  # the drafter's reward has no rival term
    _, rewards, _ = play(make(gamma=0.5, tiebreak_drafter=True), [short, long])
    assert rewards == {"agent_a": 3.0, "agent_b": 2.5}


def test_a_thinking_draft_is_scored_after_its_thoughts_and_the_rival_sees_none_of_them():
    draft = "<think>SECRET-THOUGHT <answer>41</answer> then</think><summary>S</summary><answer>42</answer>"
    obs, _, infos = play(make(), [draft, fmt("42")])
    assert infos["agent_a"]["correct"] and infos["agent_a"]["answer"] == "42"
    shown = obs[1][1]
    assert shown["draft"] == "S" and "SECRET-THOUGHT" not in shown["text"] and "41" not in shown["text"]


@pytest.mark.parametrize(
    ("action", "why"),
    [(b"<answer>4</answer>", "got bytes"), (None, "got None (the action of an agent that is done)")],
)
def test_an_action_that_is_no_string_is_refused_not_decoded(action, why) -> None:
    env = agon_env.make("agon/arith-v0")
    env.reset(seed=0)
    assert not env.action_space("agent_a").contains(action)
    with pytest.raises(TypeError, match=re.escape(why)):
        env.step(action)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("<answer>{}</answer>\ud800", "not valid Unicode"),
        ("<answer>{}</answer>" + "x" * 70_000, r"\d+ characters"),
    ],
    ids=["surrogate", "over-long"],
)
def test_a_string_outside_the_action_space_scores_as_empty_with_a_warning(text, why) -> None:
    env = agon_env.make("agon/arith-v0", mode="solo")
    env.reset(seed=0)
    action = text.format(env.unwrapped.problem.answer)  # right answer, but outside the space
    assert not env.action_space("agent_a").contains(action)
    with pytest.warns(UserWarning, match=f"outside the action space.*{why}.*scored as empty"):
        env.step(action)
    result = env.unwrapped.results[0]
    assert not result.correct and not result.format_ok and result.chars == len(action)


def test_an_observation_over_max_text_length_is_refused_not_cut() -> None:
    env = agon_env.make("agon/arith-v0", max_text_length=5, mode="solo")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"over max_text_length=5; raise max_text_length"):
        env.observe("agent_a")
    # With a challenger, the worst case (a full-length summary) is refused at reset, not mid-episode.
    env = agon_env.make("agon/arith-v0", max_text_length=4000)
    with pytest.raises(ValueError, match=r"with a full-length summary .* over max_text_length=4000"):
        env.reset(seed=0)


def test_observations_and_actions_flatten_and_round_trip() -> None:
    from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten

    env = agon_env.make("agon/arith-v0", max_text_length=4200)
    env.reset(seed=0)
    env.step("Guess. <summary>Added them up.</summary><answer>7</answer>")
    obs, space = env.observe("agent_b"), env.observation_space("agent_b")
    assert " " in obs["text"] and obs["role"] == 1  # a space broke Text's own flatten
    flat = flatten(space, obs)
    assert flat.shape == (flatdim(space),) and flatten_space(space).contains(flat)
    assert unflatten(space, flat) == obs
    act = env.action_space("agent_b")
    assert unflatten(act, flatten(act, "3 − 7 = −4 ✓")) == "3 − 7 = −4 ✓"
