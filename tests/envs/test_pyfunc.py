"""agon/pyfunc-v0: generated small functions, splits disjoint by template, references pass in the sandbox."""

from __future__ import annotations

import pytest

import agon_env
from agon_env.envs.tasks.base import SPLITS, normalize_prompt


def test_splits_share_no_function_and_no_prompt():
    from agon_env.envs.tasks.pyfunc import LEVELS, PyFuncTask, functions

    for level in LEVELS:
        statements = {s: {f.statement for f in functions(level, s)} for s in SPLITS}
        assert all(statements.values()), statements  # every split has functions at every level
        tasks = {s: PyFuncTask(level, size=300, split=s) for s in SPLITS}
        used = {s: {p.meta["statement"] for p in t.problems} for s, t in tasks.items()}
        prompts = {s: {normalize_prompt(p.prompt) for p in t.problems} for s, t in tasks.items()}
        for a in SPLITS:
            assert used[a] <= statements[a]
            for b in SPLITS:
                if a < b:
                    assert not statements[a] & statements[b] and not prompts[a] & prompts[b]


def _template(code: str, k: object) -> str:
    """A reference's code with its constant taken out: what is left is the template."""
    return code if k is None else code.replace(repr(k), "K")


@pytest.mark.parametrize("level", [1, 2, 3])
def test_no_held_out_template_appears_in_training(level):
    # Issue 47: the splits were by (template, constant), so 19 of level 1's 21 test functions were
    # training templates with another constant (add_k 7 in test, 1-6, 8, 9 in train). A held-out
    # function's name and its code with the constant taken out never occur in training now.
    from agon_env.envs.tasks.pyfunc import PyFuncTask

    seen = {}
    for split in SPLITS:
        task = PyFuncTask(level, size=400, split=split)
        names = {p.meta["function"] for p in task.problems}
        codes = {_template(p.answer["reference"], p.meta["k"]) for p in task.problems}
        seen[split] = (names, codes)
    for held_out in ("validation", "test"):
        names, codes = seen[held_out]
        assert len(names) >= 6, (held_out, sorted(names))  # a useful number of unseen templates
        assert not names & seen["train"][0], sorted(names & seen["train"][0])
        assert not codes & seen["train"][1]
    assert not seen["validation"][0] & seen["test"][0]


def test_no_template_fills_a_split():
    # A template is drawn first, then its constant: add_k's 20 constants no longer make it most of
    # its split's problems (267 of 300 level-1 test problems were one of two templates' constants).
    from collections import Counter

    from agon_env.envs.tasks.pyfunc import PyFuncTask, templates

    task = PyFuncTask(1, size=600, split="test")
    drawn = Counter(p.meta["function"] for p in task.problems)
    assert set(drawn) == {s.name for s in templates(1, "test")}
    assert max(drawn.values()) < 2 * 600 / len(drawn)


def test_problems_are_reproducible_and_show_the_first_test():
    from agon_env.envs.tasks.pyfunc import PyFuncTask

    one, two = PyFuncTask(2, size=20, split="test"), PyFuncTask(2, size=20, split="test")
    assert [p.prompt for p in one.problems] == [p.prompt for p in two.problems]
    p = one[0]
    call = p.answer["tests"][0].removeprefix("assert ").split(" == ")[0]
    assert p.prompt.startswith(f"Write a function `{p.meta['function']}(") and f"`{call}`" in p.prompt
    assert len(p.answer["tests"]) == len(set(p.answer["tests"])) == 4
    hidden = PyFuncTask(2, size=20, split="test", example=False, tests=6)[0]
    assert "For example" not in hidden.prompt and len(hidden.answer["tests"]) == 6


def test_levels_nest_and_bad_knobs_are_refused():
    from agon_env.envs.tasks.pyfunc import PyFuncTask, functions

    assert set(functions(1, "train")) < set(functions(2, "train")) < set(functions(3, "train"))
    for bad in ({"difficulty": 4}, {"tests": 0}, {"size": 0}, {"split": "dev"}):
        with pytest.raises(ValueError):
            PyFuncTask(**bad)


def test_every_reference_passes_its_tests_in_the_sandbox():
    # One spec per function name, all in one sandbox run: the references are the expected values'
    # source, so each must pass, and a wrong body must not.
    import random

    from agon_env.envs.tasks.code_checks import check_asserts
    from agon_env.envs.tasks.pyfunc import SPECS, Function, make_problem

    problems = [
        make_problem(Function(s, s.ks[0]), random.Random(i), 4, True, str(i)) for i, s in enumerate(SPECS)
    ]
    assert len({p.meta["function"] for p in problems}) == len(SPECS)
    program = "\n".join(p.answer["reference"] for p in problems)
    tests = [t for p in problems for t in p.answer["tests"]]
    report = check_asserts(program, tests)
    assert report.all_passed, [
        (t, c) for t, c in zip(tests, report.cases, strict=True) if c.status != "passed"
    ]


def test_the_env_rewards_the_reference_and_not_a_wrong_body():
    env = agon_env.make("agon/pyfunc-v0", mode="solo", split="validation", size=5)
    task = env.unwrapped.task
    assert task.prompt_family == "code-function" and task.name == "pyfunc-d1"
    problem = task[0]
    assert task.score(problem, f"```python\n{problem.answer['reference']}```") is True
    wrong = f"def {problem.meta['function']}(*args):\n    return 'nope'\n"
    assert task.score(problem, wrong) is False


def test_no_spec_is_a_worked_example():
    # The code family's worked examples must not be test items (the model would copy them).
    from agon_env.agents.prompt_families import CODE_FUNCTION
    from agon_env.envs.tasks.pyfunc import SPECS

    shown = " ".join(q for q, *_ in [*CODE_FUNCTION.drafter_examples, *CODE_FUNCTION.challenger_examples])
    shown += " ".join(q for q, *_ in CODE_FUNCTION.self_examples)
    assert not [s.name for s in SPECS if f"`{s.name}(" in shown]
