import threading
import time

import pytest

from agon_env.envs.tasks.errors import VerifierError, VerifierTimeout
from agon_env.envs.tasks.verify import answers_match, normalize, unbox


@pytest.mark.parametrize(
    "gold,pred",
    [
        ("42", "42"),
        ("42", "42.0"),
        ("1000", "1,000"),
        ("1,000", "1000"),
        ("5", "\\boxed{5}"),
        ("\\frac{1}{2}", "0.5"),
        ("\\frac{1}{2}", "\\frac12"),
        ("x^2+1", "1+x^2"),
        ("Yes", "yes"),
        ("\\text{Evelyn}", "Evelyn"),
        ("-15", "−15".replace("−", "-")),
    ],
)
def test_equal_answers(gold, pred):
    assert answers_match(gold, pred)


@pytest.mark.parametrize(
    "gold,pred",
    [("42", "41"), ("yes", "no"), ("true", "1"), ("1,-2", "1"), ("3", ""), ("3", None), ("7", "x" * 5000)],
)
def test_unequal_answers(gold, pred):
    assert not answers_match(gold, pred)


def test_normalize_pieces():
    assert unbox("so \\boxed{\\frac{a}{b}} done") == "\\frac{a}{b}"
    assert normalize(" $1,234,567$. ") == "1234567"
    assert normalize("1,-2") == "1,-2"
    assert normalize("TRUE") == "true"


def test_pathological_answer_is_bounded_and_a_timeout_from_a_thread():
    out: list[object] = []

    def judge() -> None:
        try:
            out.append(answers_match("3", "10^{10^{10^{10}}}", timeout=2.0))
        except VerifierTimeout as e:
            out.append(e)

    t0 = time.monotonic()
    th = threading.Thread(target=judge)
    th.start()
    th.join(30)
    assert len(out) == 1 and isinstance(out[0], VerifierTimeout)  # no verdict, not a wrong answer
    assert time.monotonic() - t0 < 10
    # The verifier restarts cleanly after a kill.
    assert answers_match("\\frac{1}{3}", "\\frac{2}{6}")


def test_mentions_and_redacts_answers_by_value():
    from agon_env.envs.tasks.verify import mentions_answer, redact_answer

    assert mentions_answer("Six sevens are 42.", "42") and not mentions_answer("Six sevens are 420.", "42")
    assert mentions_answer("half is 0.5", "1/2") and mentions_answer("there are 1,000 apples", "1000")
    assert mentions_answer("so 3 - 4 = -1", "-1") and not mentions_answer("so 3 - 4 = -1", "1")
    assert mentions_answer("the set is {a, b}", "{A, B}") and not mentions_answer("anything", None)
    assert redact_answer("6*7 = 42, so 42.0 but 420", "42") == "6*7 = [withheld], so [withheld] but 420"


def test_a_raising_verifier_is_an_error_with_its_traceback_and_the_worker_lives_on(fake_math_verify):
    fake_math_verify("raises")
    for _ in range(2):  # the child caught it: the same worker answers the next request
        with pytest.raises(VerifierError, match="fake verifier failure at 100%") as info:
            answers_match("x^2+1", "1+x^2")
        assert not isinstance(info.value, VerifierTimeout) and "Traceback" in str(info.value)
    assert answers_match("42", "42.0")  # plain numbers never reach the worker


def test_a_dying_verifier_is_an_error_carrying_its_stderr(fake_math_verify):
    fake_math_verify("dies")
    with pytest.raises(VerifierError, match="fake verifier died loudly"):
        answers_match("x^2+1", "1+x^2")


def test_a_hanging_verifier_is_a_timeout(fake_math_verify):
    fake_math_verify("hangs")
    t0 = time.monotonic()
    with pytest.raises(VerifierTimeout, match="within 1 s"):
        answers_match("x^2+1", "1+x^2", timeout=1.0)
    assert time.monotonic() - t0 < 10
