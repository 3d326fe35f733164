import pytest
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

import agon_env
from agon_env.envs.draft_challenge import DraftChallengeEnv
from agon_env.envs.tasks.arith import ArithTask
from agon_env.envs.tasks.data import offline_status
from agon_env.registry import _REGISTRY

BUILTIN = {
    "agon/arith-v0",
    "agon/math-v0",
    "agon/gsm8k-v0",
    "agon/deepmath-v0",
    "agon/humaneval-v0",
    "agon/mbpp-v0",
    "agon/codecontests-v0",
}


def test_builtin_ids_registered():
    assert set(agon_env.registered_ids()) >= BUILTIN


def test_unknown_id_suggests_close_ids():
    with pytest.raises(KeyError) as e:
        agon_env.make("agon/arith-v1")
    msg = str(e.value)
    assert "Did you mean" in msg and "agon/arith-v0" in msg and "\n" not in msg


def test_overrides_route_to_env_and_task():
    env = agon_env.make("agon/arith-v0", difficulty=5, mode="self", exchange="none", lam=1.0)
    assert isinstance(env.unwrapped, DraftChallengeEnv)
    assert env.task.difficulty == 5 and env.mode == "self" and env.exchange == "none" and env.lam == 1.0


def test_register_user_task_in_a_few_lines():
    class Parity:
        name = "parity"

        def __len__(self):
            return 10

        def __getitem__(self, i):
            from agon_env.envs.tasks.base import Problem

            return Problem(
                id=str(i), prompt=f"Is {i} even? Answer yes or no.", answer="yes" if i % 2 == 0 else "no"
            )

        def score(self, problem, answer):
            return answer.strip().lower() == problem.answer

    agon_env.register("test/user-parity-v0", entry_point=Parity)
    try:
        env = agon_env.make("test/user-parity-v0", mode="solo")
        env.reset(options={"problem_index": 4})
        env.step("<summary>4 is divisible by 2</summary><answer>Yes</answer>")
        assert env.rewards == {"agent_a": 2.5}
        with pytest.raises(ValueError, match="already registered"):
            agon_env.register("test/user-parity-v0", entry_point=Parity)
    finally:
        _REGISTRY.pop("test/user-parity-v0")


def test_string_entry_point_and_prebuilt_task():
    agon_env.register("test/arith-str-v0", "agon_env.envs.tasks.arith:ArithTask", kwargs={"difficulty": 1})
    try:
        assert agon_env.make("test/arith-str-v0").task.difficulty == 1
        env = agon_env.make("test/arith-str-v0", task=ArithTask(4))
        assert env.task.difficulty == 4
    finally:
        _REGISTRY.pop("test/arith-str-v0")


def test_bad_entry_point():
    agon_env.register("test/bad-v0", "agon_env.envs.tasks.arith")
    try:
        with pytest.raises(ValueError, match="module:attr"):
            agon_env.make("test/bad-v0")
    finally:
        _REGISTRY.pop("test/bad-v0")


def test_make_sets_spec_and_enforces_order():
    env = agon_env.make("agon/math-v0", problems=[{"question": "1+1?", "answer": "2"}], mode="solo")
    assert isinstance(env, OrderEnforcingWrapper) and isinstance(env.unwrapped, DraftChallengeEnv)
    assert env.spec.id == "agon/math-v0" and env.spec is agon_env.spec("agon/math-v0")
    with pytest.raises(AssertionError, match="before step"):
        env.step("<summary>s</summary><answer>2</answer>")
    with pytest.raises(AttributeError, match="before reset"):
        env.agent_selection  # noqa: B018
    env.reset(seed=0)
    env.step("<summary>s</summary><answer>2</answer>")
    assert env.rewards == {"agent_a": 2.5} and env.spawn().task is env.task


@pytest.mark.parametrize("env_id", ["agon/arith-v0", "agon/humaneval-v0"])
def test_builtin_ids_set_their_spec(env_id):
    assert agon_env.make(env_id).spec.id == env_id


def test_an_aec_env_entry_point_is_wrapped_too():
    class Wrapped(BaseWrapper):
        def __init__(self, **kw):
            super().__init__(agon_env.make("agon/arith-v0", **kw))

    agon_env.register("test/wrapped-v0", entry_point=Wrapped)
    try:
        env = agon_env.make("test/wrapped-v0", mode="solo")
        assert isinstance(env, OrderEnforcingWrapper) and isinstance(env.env, Wrapped)
        assert env.spec.id == "test/wrapped-v0" and env.mode == "solo"
        assert isinstance(env.unwrapped, AECEnv) and not isinstance(env.unwrapped, BaseWrapper)
    finally:
        _REGISTRY.pop("test/wrapped-v0")


def test_agon_envs_says_what_an_offline_id_needs_when_its_data_is_missing(tmp_path, monkeypatch):
    import agon_env

    monkeypatch.delenv("AGON_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data from here
    assert offline_status(agon_env.spec("agon/arith-v0")) == "yes"
    assert (
        offline_status(agon_env.spec("agon/mbpp-v0"))
        == "needs mbpp.jsonl in $AGON_DATA_DIR (unset), or the hub"
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "mbpp.jsonl").write_text("")
    monkeypatch.setenv("AGON_DATA_DIR", str(data))
    assert offline_status(agon_env.spec("agon/mbpp-v0")) == "yes"
    assert offline_status(agon_env.spec("agon/deepmath-v0")) == "needs path= or the hub"
