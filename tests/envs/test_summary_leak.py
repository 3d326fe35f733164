"""The summary_leak matcher: an answer counts as stated when a signed number token equal to it
stands as a result (after a result cue, or alone in the closing clause), never as a bare operand."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agon_env.envs.tasks.verify import REDACTED, mentions_answer, redact_answer

MINUSES = ("-", "\u2212")  # ASCII hyphen-minus, Unicode minus sign
CUES = ("=", "is", "equals", "gives", "to get", "makes", "→", "answer:", "so", "result is")


def _signed(n: int, minus: str) -> str:
    return f"{minus}{-n}" if n < 0 else str(n)


@pytest.mark.parametrize(
    "text,answer,stated",
    [
        # The examples.
        ("3 \u2212 7 = \u22124", "-4", True),  # Unicode minus: was missed
        ("3 \u2212 7 = \u22124", "\u22124", True),
        ("3 \u2212 7 = \u22124", "4", False),  # was a false positive (the 4 of -4)
        ("Subtracting 5 from 10", "5", False),  # an operand, not the result: was a false positive
        ("Subtracting 5 from 10", "10", False),
        ("Subtracting 5 from 10 gives 5", "5", True),
        # Signs and operands.
        ("x = -4", "4", False),
        ("x = -4", "-4", True),
        ("7 - 4 = 3", "4", False),
        ("7 - 4 = 3", "3", True),
        ("3-7=-4", "-4", True),
        ("= 3 + 4 = 7", "3", False),
        ("= 3 + 4 = 7", "7", True),
        ("x = (-4)", "-4", True),
        ("-4.", "-4", True),  # the whole summary is the number
        # Real SmolLM2-135M summaries (arith level 2.5): a closing clause, an article, an operand.
        ("Six more than a multiple of 63, 9.", "9", True),
        ("A 75 is a 20.", "20", True),
        ("78 is the result of 74.", "74", False),
        ("Multiplied the 5 apples by 2", "5", False),  # running text, no cue
        ("half is 0.5", "1/2", True),
        ("there are 1,000 apples", "1000", True),
        ("Six sevens are 420.", "42", False),
    ],
)
def test_stated_as_a_result(text, answer, stated):
    assert mentions_answer(text, answer) is stated
    assert (REDACTED in redact_answer(text, answer)) is stated  # redaction blanks exactly those


@given(st.integers(-(10**6), 10**6), st.sampled_from(CUES), st.sampled_from(MINUSES))
def test_a_result_after_a_cue_is_stated_with_its_sign(n, cue, minus):
    text = f"Worked it out {cue} {_signed(n, minus)}."
    assert mentions_answer(text, str(n)) and mentions_answer(text, _signed(n, "\u2212"))
    if n != 0:
        assert not mentions_answer(text, str(-n))  # the sign-flipped answer is not stated


@given(st.integers(-999, 999), st.integers(-999, 999), st.sampled_from(MINUSES))
def test_operands_are_not_results(a, b, minus):
    a_txt, b_txt = _signed(a, minus), _signed(b, minus)
    for text in (f"Subtracting {a_txt} from {b_txt}", f"= {a_txt} + {b_txt}", f"so {a_txt} * ({b_txt})"):
        assert not mentions_answer(text, str(a)), text
    assert not mentions_answer(f"Subtracting {a_txt} from {b_txt}", str(b))


WORDS = (*CUES, "+", "-", "(", ")", "\u2212", "and", ",", ".")


@given(st.lists(st.one_of(st.sampled_from(WORDS), st.integers(-20, 20)), max_size=12), st.integers(-20, 20))
def test_redaction_leaves_nothing_the_matcher_finds(parts, n):
    text = " ".join(map(str, parts))
    once = redact_answer(text, str(n))
    assert not mentions_answer(once, str(n)) and redact_answer(once, str(n)) == once
