"""One rule for what a challenger is given of a draft, read by every channel (issue 47, item 3).

The same drafts are unusable in every channel: a text channel shows ``NO_SUMMARY`` for them and
the latent channel's span is empty (so its challenger reads no cache and the turn counts as
``draft_unusable``). On 18b19e3 the latent span held the summary's tags (3-7 tokens) for an empty,
whitespace-only or answer-only summary, and a summary after the answer block was shown as text.
"""

from __future__ import annotations

import pytest

import agon_env
from agon_env.agents.latent_spans import SPANS, span_tokens
from agon_env.agents.tiny import build_tiny_tokenizer
from agon_env.blocks import given
from agon_env.envs.exchange import CHANNELS, NO_SUMMARY

PROBLEMS = [{"question": "What is 40 + 2?", "answer": "42"}]

# (draft completion, does it give the challenger its summary, does it give its completion)
DRAFTS = {
    "normal": ("I add. <summary>Forty plus two.</summary> <answer>42</answer>", True, True),
    "no summary tag": ("I add. <answer>42</answer>", False, True),
    "empty summary": ("<summary></summary><answer>4</answer>", False, False),
    "whitespace summary": ("<summary> \n </summary><answer>4</answer>", False, False),
    "answer-only summary": ("<summary><answer>4</answer></summary>", False, False),
    "summary after the answer": ("So. <answer>4</answer> <summary>Added them.</summary>", False, True),
    "nothing at all": ("", False, False),
    "answer first, nothing before": ("<answer>4</answer> trailing words", False, False),
    "merged tag token": ("It is 42.<summary>Forty plus two.</summary><answer>42</answer>", True, True),
}
PART_OF = {"summary": 1, "redacted": 1, "trace": 2}
"""The text channels, and which column of :data:`DRAFTS` says what they show."""


def test_every_text_channel_is_listed():
    text = {name for name, c in CHANNELS.items() if c.text}
    assert text == set(PART_OF)
    assert {c.name for c in CHANNELS.values() if not c.text} == {"none", "latent"}


def _challenger_draft(exchange: str, draft: str) -> str:
    env = agon_env.make("agon/math-v0", problems=PROBLEMS, exchange=exchange)
    env.reset(seed=0, options={"problem_index": 0})
    env.step(draft)
    return env.observe(env.agent_selection)["draft"]


@pytest.mark.parametrize("channel", sorted(PART_OF))
@pytest.mark.parametrize("name", sorted(DRAFTS))
def test_a_text_channel_shows_nothing_exactly_for_the_unusable_drafts(channel, name):
    draft, *usable = DRAFTS[name]
    shown = _challenger_draft(channel, draft)
    assert (shown != NO_SUMMARY) == usable[PART_OF[channel] - 1]
    assert "answer>" not in shown.lower()


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.mark.parametrize("span", sorted(SPANS))
@pytest.mark.parametrize("name", sorted(DRAFTS))
def test_the_latent_span_is_empty_exactly_for_the_unusable_drafts(tokenizer, span, name):
    draft, *usable = DRAFTS[name]
    ids = tokenizer(draft, add_special_tokens=False)["input_ids"]
    start, end = span_tokens(tokenizer, ids, span, max_tokens=10_000)
    column = 0 if SPANS[span].part == "summary" else 1
    assert (end > start) == usable[column], (draft, start, end)
    read = tokenizer.decode(ids[start:end])
    assert "<answer" not in read.lower()  # never an answer tag, whole or begun


def test_the_summary_span_covers_its_tags_and_a_straddling_token_rides_along(tokenizer):
    text = "It is 42.<summary>Forty plus two.</summary><answer>42</answer>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    start, end = span_tokens(tokenizer, ids, "summary", max_tokens=10_000)
    read = tokenizer.decode(ids[start:end])
    assert read.endswith("<summary>Forty plus two.</summary>")
    # At most the characters of the one token that holds the block's first character ride along.
    first = tokenizer.decode(ids[start : start + 1])
    assert len(read) - len("<summary>Forty plus two.</summary>") < len(first)


@pytest.mark.parametrize(
    ("text", "part", "shown"),
    [
        ("<summary>  a b  </summary><answer>1</answer>", "summary", "a b"),
        ("<summary>a </answer> b</summary>", "summary", "a"),
        ("<think>x <summary>no</summary></think> r <summary>yes</summary>", "summary", "yes"),
        ("<think>still thinking <summary>no</summary>", "summary", ""),
        ("reason <summary>s</summary> <answer>1</answer> after", "completion", "reason <summary>s</summary>"),
    ],
)
def test_given_by_hand(text, part, shown):
    lo, hi = given(text, part).content
    assert text[lo:hi] == shown
    assert given(text, part).usable == bool(shown)
