import json

import pytest

from agon_env.envs.tasks.arith import ArithTask, evaluate
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.math import MathTask, deepmath, gsm8k, gsm8k_final_answer


def test_arith_is_deterministic_and_split_disjoint():
    a, b = ArithTask(3, seed=1), ArithTask(3, seed=1)
    assert [a[i] for i in range(20)] == [b[i] for i in range(20)]
    test = ArithTask(3, seed=1, split="test")
    assert [a[i].prompt for i in range(50)] != [test[i].prompt for i in range(50)]


@pytest.mark.parametrize("level", range(1, 6))
def test_arith_answers_are_exact(level):
    t = ArithTask(level)
    for i in range(50):
        p = t[i]
        assert p.answer == str(evaluate(p.meta["expression"]))
        assert t.score(p, p.answer) and not t.score(p, str(int(p.answer) + 1))


def test_arith_levels_and_errors():
    assert evaluate("(2 + 3) × 4 − 1") == 19
    assert evaluate("2 + 3 × 4") == 14
    with pytest.raises(ValueError):
        ArithTask(6)
    with pytest.raises(ValueError):
        evaluate("__import__('os')")
    with pytest.raises(IndexError):
        ArithTask(1, size=3)[3]


def test_math_task_in_memory_and_missing_field():
    t = MathTask(problems=[{"question": "1+1?", "answer": "2"}, {"question": "half?", "answer": "\\frac12"}])
    assert len(t) == 2 and t.score(t[0], "2") and t.score(t[1], "0.5")
    with pytest.raises(KeyError, match="row 1 has no field 'answer'"):
        MathTask(problems=[{"question": "a", "answer": "1"}, {"question": "b"}])
    with pytest.raises(ValueError, match="exactly one"):
        MathTask()


def test_math_task_field_mapping_from_file(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(json.dumps({"q": f"{i}+1?", "a": i + 1, "uid": f"u{i}"}) for i in range(3)))
    t = MathTask(path=f, question_field="q", answer_field="a", id_field="uid")
    assert [p.id for p in t] == ["u0", "u1", "u2"] and t.score(t[2], "3")
    with pytest.raises(FileNotFoundError):
        MathTask(path=tmp_path / "absent.jsonl")


def test_deepmath_filter_on_a_fixture(tmp_path):
    rows = [
        {"question": "hard", "final_answer": "7", "difficulty": 8.5},
        {"question": "easy", "final_answer": "7", "difficulty": 5.0},
        {"question": "binary", "final_answer": "Yes", "difficulty": 9.0},
        {"question": "hard2", "final_answer": "\\pi", "difficulty": 8.0},
    ]
    f = tmp_path / "deepmath.parquet"
    import pandas as pd

    pd.DataFrame(rows).to_parquet(f)
    t = deepmath(path=f)
    assert [p.prompt for p in t] == ["hard", "hard2"]
    assert [p.prompt for p in deepmath(path=f, drop_binary=False)] == ["hard", "binary", "hard2"]


def test_gsm8k_answer_parsing():
    assert gsm8k_final_answer("so <<2*3=6>> 6\n#### 1,234") == "1234"
    with pytest.raises(ValueError):
        gsm8k_final_answer("no marker")


@pytest.mark.skipif(local_file("gsm8k_test.jsonl") is None, reason="../shared/data absent")
def test_gsm8k_real_data():
    t = gsm8k(split="test")
    assert len(t) == 1319
    assert all("," not in p.answer for p in t)
    assert t.score(t[0], t[0].answer)
