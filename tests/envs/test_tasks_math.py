import json
import pathlib

import pytest

import agon_env
from agon_env.envs.tasks.arith import ArithTask, evaluate
from agon_env.envs.tasks.base import Problem
from agon_env.envs.tasks.data import local_file
from agon_env.envs.tasks.math import (
    MathTask,
    deepmath,
    gsm8k,
    gsm8k_final_answer,
    load_math_problems,
    math_task,
)


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
    t = math_task(problems=[{"question": "1+1?", "answer": "2"}, {"question": "half?", "answer": "\\frac12"}])
    assert len(t) == 2 and t.score(t[0], "2") and t.score(t[1], "0.5")
    with pytest.raises(KeyError, match="row 1 has no field 'answer'"):
        math_task(problems=[{"question": "a", "answer": "1"}, {"question": "b"}])
    with pytest.raises(ValueError, match="exactly one"):
        math_task()


def test_math_task_field_mapping_from_file(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(json.dumps({"q": f"{i}+1?", "a": i + 1, "uid": f"u{i}"}) for i in range(3)))
    t = math_task(path=f, question_field="q", answer_field="a", id_field="uid")
    assert [p.id for p in t] == ["u0", "u1", "u2"] and t.score(t[2], "3")
    with pytest.raises(FileNotFoundError):
        math_task(path=tmp_path / "absent.jsonl")


def test_load_math_problems_maps_filters_and_limits(tmp_path):
    rows = [{"q": f"{i}+1?", "a": f" {i + 1} ", "level": i % 2} for i in range(6)]
    problems = load_math_problems(
        rows, question_field="q", answer_field="a", row_filter=lambda r: r["level"] == 1, limit=2
    )
    assert [(p.id, p.prompt, p.answer, p.meta) for p in problems] == [
        ("0", "1+1?", "2", {"level": 1}),
        ("1", "3+1?", "4", {"level": 1}),
    ]
    # The filter runs before the field check, so a row it drops may lack fields.
    kept = load_math_problems(
        [{"question": "x"}, *rows], question_field="q", answer_field="a", row_filter=lambda r: "q" in r
    )
    assert len(kept) == 6
    with pytest.raises(KeyError, match="row 1 has no field 'q'"):
        load_math_problems([rows[0], {"a": "1"}], question_field="q", answer_field="a")
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    from_file = load_math_problems(
        f, question_field="q", answer_field="a", answer_fn=lambda a: f"<{a}>", limit=1
    )
    assert [p.answer for p in from_file] == ["< 1 >"]


def test_math_task_scores_prebuilt_problems():
    t = MathTask([Problem(id="p", prompt="half?", answer="\\frac12")], name="mine", verify_timeout=2.0)
    assert t.name == "mine" and t.score(t[0], "0.5") and not t.score(t[0], "2")
    with pytest.raises(ValueError, match="at least one problem"):
        MathTask([])


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


def test_hub_dataset_without_data_or_network_fails_at_once_naming_agon_data_dir(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from agon_env.envs.tasks.data import DataUnavailableError

    monkeypatch.delenv("AGON_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data from here
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    start = time.monotonic()
    with pytest.raises(DataUnavailableError, match=r"AGON_DATA_DIR"):
        agon_env.make("agon/gsm8k-v0")
    assert time.monotonic() - start < 10  # datasets alone retries the hub for ~30 s


def test_offline_mode_reads_the_datasets_cache_and_says_when_it_is_not_there(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agon_env.envs.tasks import data

    monkeypatch.delenv("AGON_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # As in a process started with it set: datasets and huggingface_hub read it once, at import, and
    # one imported earlier in this session would otherwise retry the hub for ~20 s before failing.
    import datasets.config
    import huggingface_hub.constants

    for module in (datasets.config, huggingface_hub.constants):
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(data, "hub_reachable", lambda timeout=3.0: pytest.fail("offline mode must not probe"))
    with pytest.raises(data.DataUnavailableError, match="not in the datasets cache"):
        data.load_rows("no-such-owner/no-such-dataset")
