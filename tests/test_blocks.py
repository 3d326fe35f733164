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


# Drafts with special tokens (issue 58, item 5): the text channels read ``completion_text``, and
# on 86f3fbc the latent span decoded the same ids with their special tokens kept, so one draft was
# usable on one channel and not on the other.
SPECIAL_DRAFTS = {
    # a summary of only a special token: empty as text, a one-token span on 86f3fbc
    "summary of only <|im_start|>": ["<summary>", "<|im_start|>", "</summary><answer>4</answer>"],
    # a draft of nothing but EOS: no completion as text, the EOS token's cache on 86f3fbc
    "EOS only": ["<|im_end|>"],
    # a special token inside the tag: a summary as text, no summary tag at all on 86f3fbc
    "special token inside the tag": [
        "<sum",
        "<|im_end|>",
        "mary>Forty plus two.</summary><answer>42</answer>",
    ],
}


def _ids(tokenizer, pieces: list[str]) -> list[int]:
    ids = [i for p in pieces for i in tokenizer(p, add_special_tokens=False)["input_ids"]]
    assert any(i in tokenizer.all_special_ids for i in ids)  # the special token is one token
    return ids


@pytest.mark.parametrize("span", sorted(SPANS))
@pytest.mark.parametrize("name", sorted(SPECIAL_DRAFTS))
def test_the_latent_span_reads_the_text_the_text_channels_read(tokenizer, span, name):
    from agon_env.agents.protocol import completion_text

    ids = _ids(tokenizer, SPECIAL_DRAFTS[name])
    text = completion_text(tokenizer, ids)
    assert "<|" not in text
    start, end = span_tokens(tokenizer, ids, span, max_tokens=10_000)
    assert (end > start) == given(text, SPANS[span].part).usable, (text, start, end)
    if end > start:
        assert "<summary>" in completion_text(tokenizer, ids[start:end]) or SPANS[span].part == "completion"


@pytest.mark.parametrize("name", sorted(SPECIAL_DRAFTS))
def test_a_text_channel_and_the_latent_span_agree_on_a_special_token_draft(tokenizer, name):
    from agon_env.agents.protocol import completion_text

    ids = _ids(tokenizer, SPECIAL_DRAFTS[name])
    shown = _challenger_draft("summary", completion_text(tokenizer, ids))
    start, end = span_tokens(tokenizer, ids, "summary", max_tokens=10_000)
    assert (shown != NO_SUMMARY) == (end > start)


def test_the_backends_and_the_stream_decode_by_the_one_rule(tokenizer):
    from agon_env.agents.protocol import completion_text
    from agon_env.agents.streaming import TextDeltas

    ids = _ids(tokenizer, SPECIAL_DRAFTS["special token inside the tag"])
    pieces: list[str] = []
    deltas = TextDeltas(tokenizer, lambda _row, piece: pieces.append(piece))
    for i in ids:
        deltas.add(0, [i])
    deltas.finish(0)
    assert (
        "".join(pieces) == completion_text(tokenizer, ids) == tokenizer.decode(ids, skip_special_tokens=True)
    )
