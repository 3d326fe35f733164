"""The fingerprint ``agon study register`` prints: stable for one plan and code, moved by anything a
registration freezes (issue 57, item 1)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from agon_env.config import ConfigError
from agon_env.study.anchor import anchor, fingerprint
from agon_env.study.commands.study import main
from agon_env.study.plan import StudyPlan, from_dict, load
from agon_env.study.registration import check, prompts_fingerprint, register

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "studies" / "smoke.yaml"


def smoke(**changes: object) -> StudyPlan:
    return from_dict({**load(SMOKE).as_dict(), **changes})


def frozen(plan: StudyPlan) -> dict:
    return anchor(plan, None, prompts_fingerprint())


def test_the_fingerprint_is_stable_and_holds_each_test_problems_id_and_prompt_hash() -> None:
    first, again = frozen(smoke()), frozen(smoke())
    assert fingerprint(first) == fingerprint(again)
    problems = first["problems"][""]  # the plan's own task level: no calibration
    assert len(problems["ids"]) == len(set(problems["prompt_sha256"])) == 6
    assert list(first["task_modules"]) == ["agon_env.envs.tasks.arith"]
    assert first["decision"]["confidence"] == 0.95 and first["seeds"] == [0, 1]


def test_another_seed_or_rule_moves_it() -> None:
    base = fingerprint(frozen(smoke()))
    assert fingerprint(frozen(smoke(seeds=[0, 2]))) != base
    assert fingerprint(frozen(smoke(decision={"confidence": 0.9}))) != base


def test_another_prompt_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from agon_env.agents.prompts import PROMPT_FAMILIES, RolePrompts

    base = frozen(smoke())
    monkeypatch.setitem(PROMPT_FAMILIES, "arithmetic", RolePrompts(drafter_system="Answer at once."))
    edited = frozen(smoke())
    assert edited["prompt_families"]["arithmetic"] != base["prompt_families"]["arithmetic"]
    assert fingerprint(edited) != fingerprint(base)


def test_a_calibrated_plan_freezes_every_candidates_test_problems() -> None:
    cal = {"keyword": "difficulty", "candidates": [1, 2], "band": [0.2, 0.4], "problems": 5}
    problems = frozen(smoke(calibration=cal))["problems"]
    assert set(problems) == {"difficulty=1", "difficulty=2"}
    assert problems["difficulty=1"]["prompt_sha256"] != problems["difficulty=2"]["prompt_sha256"]


TASK = """
import agon_env
from agon_env.envs.tasks.base import Problem, carve


class Doubles:
    name = "doubles"
    prompt_family = "math"

    def __init__(self, n: int = 120, split: str | None = "train"):
        every = [Problem(str(i), f"What is twice {i}?", str(2 * i)) for i in range(n)]
        self.problems = carve(every, split)

    def __len__(self):
        return len(self.problems)

    def __getitem__(self, i):
        return self.problems[i]

    def score(self, problem, answer):
        return answer.strip() == problem.answer


agon_env.register("anchor-test/doubles-v0", entry_point=Doubles)
"""


def test_a_user_tasks_source_moves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "anchor_doubles_task.py"
    module.write_text(textwrap.dedent(TASK))
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = smoke(train={**load(SMOKE).train, "env.id": "anchor_doubles_task:anchor-test/doubles-v0"})
    plan = from_dict({**plan.as_dict(), "train": {**plan.train, "env.kwargs": {}}})
    before = frozen(plan)
    assert "anchor_doubles_task" in before["task_modules"] and "math" in before["prompt_families"]
    register(plan, tmp_path / "study")
    assert check(plan, tmp_path / "study") is not None
    module.write_text(module.read_text() + "# the task edited after its registration\n")
    with pytest.raises(
        ConfigError, match="the task module anchor_doubles_task differs from the one registered"
    ):
        check(plan, tmp_path / "study")  # `agon study run` runs the registered code only
    after = frozen(plan)
    assert after["task_modules"]["anchor_doubles_task"] != before["task_modules"]["anchor_doubles_task"]
    assert fingerprint(after) != fingerprint(before)


def test_register_prints_the_fingerprint_it_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["register", str(SMOKE), "--out", str(tmp_path / "s")]) == 0
    reg = json.loads((tmp_path / "s" / "registration.json").read_text())
    assert reg["fingerprint"] == fingerprint(reg["anchor"]) == fingerprint(frozen(smoke()))
    assert f"fingerprint: {reg['fingerprint']}\n" in capsys.readouterr().out
