from hypothesis import given, settings
from hypothesis import strategies as st

from agon_env.envs.format import parse_completion, strip_answer_blocks


def test_well_formed():
    p = parse_completion("Let me think. 2+2=4 <summary>added</summary>\n<answer> 4 </answer>\n")
    assert (p.summary, p.answer, p.format_ok) == ("added", "4", True)
    assert p.reasoning == "Let me think. 2+2=4 "


def test_tags_are_case_insensitive():
    assert parse_completion("<SUMMARY>s</SUMMARY><Answer>1</Answer>").format_ok


def test_answer_before_summary_breaks_format_but_keeps_answer():
    p = parse_completion("<answer>3</answer><summary>s</summary>")
    assert not p.format_ok and p.answer == "3" and p.summary == "s"


def test_missing_summary():
    p = parse_completion("work <answer>3</answer>")
    assert not p.format_ok and p.answer == "3" and p.summary is None


def test_several_answers_take_last_and_break_format():
    p = parse_completion("<summary>s</summary><answer>1</answer><answer>2</answer>")
    assert not p.format_ok and p.answer == "2"


def test_nested_tags_break_format():
    p = parse_completion("<summary>s <answer>1</answer></summary>")
    assert not p.format_ok


def test_unbalanced_and_stray_closers():
    assert not parse_completion("<summary>s<answer>1</answer>").format_ok
    assert not parse_completion("</summary><summary>s</summary><answer>1</answer>").format_ok


def test_empty_blocks_and_trailing_text():
    assert not parse_completion("<summary></summary><answer>1</answer>").format_ok
    assert not parse_completion("<summary>s</summary><answer> </answer>").format_ok
    assert not parse_completion("<summary>s</summary><answer>1</answer> and more").format_ok


def test_empty_and_non_string():
    assert parse_completion("").answer is None
    assert not parse_completion(None).format_ok  # type: ignore[arg-type]


def test_one_megabyte_completion_parses():
    text = "x" * 1_000_000 + "<summary>s</summary><answer>7</answer>"
    p = parse_completion(text)
    assert p.format_ok and p.answer == "7"


def test_strip_answer_blocks():
    assert strip_answer_blocks("a <answer>42</answer> b </answer>") == "a  b "
    assert "42" not in strip_answer_blocks("<ANSWER>\n42\n</ANSWER>")


TAGS = st.sampled_from(["<summary>", "</summary>", "<answer>", "</answer>", "x", "∫", "\n", "😀", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(TAGS, st.text(max_size=8)), max_size=40).map("".join))
def test_fuzz_parser_never_raises_and_is_consistent(text):
    p = parse_completion(text)
    if p.format_ok:
        assert p.summary and p.answer
        assert text.count("<answer>") + text.count("<ANSWER>") >= 1
    assert "<answer>" not in strip_answer_blocks(text).lower()


def test_thoughts_are_parsed_apart_and_tags_inside_them_ignored():
    p = parse_completion("<think>maybe <answer>41</answer> no</think><summary>S</summary><answer>42</answer>")
    assert (p.answer, p.summary, p.format_ok) == ("42", "S", True)
    assert p.thoughts == "maybe <answer>41</answer> no" and "41" not in p.reasoning
    cut = parse_completion("<think>still thinking <summary>x</summary><answer>1</answer>")
    assert (cut.answer, cut.summary, cut.format_ok) == (None, None, False)  # cut off while thinking
    opened_by_template = parse_completion("thoughts </think>\n<summary>S</summary><answer>3</answer>")
    assert opened_by_template.thoughts == "thoughts" and opened_by_template.answer == "3"
    assert parse_completion("<summary>S</summary><answer>3</answer>").thoughts is None
