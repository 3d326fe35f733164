import subprocess
import sys

import pytest
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

import agon_env
from agon_env.envs.draft_challenge import DraftChallengeEnv
from agon_env.envs.tasks.arith import ArithTask
from agon_env.envs.tasks.data import offline_status
from agon_env.registry import _FROM_ENTRY_POINTS, _REGISTRY

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


# -- tasks found as Gymnasium finds envs: module:id, and installed entry points ----------

_ROT13_TASKS = """
import codecs

import agon_env
from agon_env.envs.tasks.base import ListTask, Problem

WORDS = ["hello", "world", "agon", "draft", "check"]


class Rot13(ListTask):
    name = "rot13"
    prompt_family = "math"

    def __init__(self, n: int = 5):
        super().__init__([Problem(str(i), f"Decode the ROT13 text {codecs.encode(w, 'rot13')!r}.", w)
                          for i, w in enumerate(WORDS[:n])])

    def score(self, problem, answer):
        return answer.strip().lower() == problem.answer


# The entry point's id, registered again with more to say; and one id registered in code only.
agon_env.register("me/rot13-v0", "rot13pkg.tasks:Rot13", description="decode ROT13 words")
agon_env.register("me/rot13-short-v0", "rot13pkg.tasks:Rot13", kwargs={"n": 2})
"""


@pytest.fixture
def rot13_site(tmp_path):
    """A folder laid out as site-packages with one installed package, ``rot13pkg``, whose
    ``.dist-info`` declares ``me/rot13-v0`` under the ``agon_env.tasks`` entry-point group, and
    an environment whose PYTHONPATH adds it (the package is importable through it alone)."""
    import os

    site = tmp_path / "site-packages"
    (site / "rot13pkg").mkdir(parents=True)
    (site / "rot13pkg" / "__init__.py").write_text("")
    (site / "rot13pkg" / "tasks.py").write_text(_ROT13_TASKS)
    info = site / "rot13pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rot13pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agon_env.tasks]\nme/rot13-v0 = rot13pkg.tasks:Rot13\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return elsewhere, {**os.environ, "PYTHONPATH": path}


def _agon(args, cwd, env, timeout=120):
    # -P: no current folder on sys.path, as for the installed console script.
    code = "import sys; from agon_env.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-P", "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_an_installed_entry_point_is_listed_and_made_from_another_folder(rot13_site):
    cwd, env = rot13_site
    r = _agon(["envs"], cwd, env)
    assert r.returncode == 0, r.stderr
    assert "me/rot13-v0" in r.stdout and "agon/arith-v0" in r.stdout
    r = _agon(["episode", "--env", "me/rot13-v0", "--seed", "1"], cwd, env)
    assert r.returncode == 0, r.stderr
    assert "Decode the ROT13 text" in r.stdout
    lazy = (
        "import sys, agon_env\n"
        "assert 'me/rot13-v0' in agon_env.registered_ids() and 'rot13pkg' not in sys.modules\n"
        "assert 'entry point of rot13pkg' in agon_env.spec('me/rot13-v0').description\n"
        "env = agon_env.make('me/rot13-v0', mode='solo')\n"
        "env.reset(options={'problem_index': 0})\n"
        "env.step('<summary>shifted back by 13</summary><answer>hello</answer>')\n"
        "assert env.rewards == {'agent_a': 2.5}, env.rewards\n"
        # Importing the package registered the id again, in code: that registration now answers.
        "assert agon_env.spec('me/rot13-v0').description == 'decode ROT13 words'\n"
        "print('ok')\n"
    )
    r = subprocess.run(
        [sys.executable, "-P", "-c", lazy], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_module_colon_id_imports_the_module_then_makes_the_id(rot13_site, monkeypatch):
    cwd, _ = rot13_site
    monkeypatch.syspath_prepend(str(cwd.parent / "site-packages"))
    try:
        made = agon_env.make("rot13pkg.tasks:me/rot13-short-v0", mode="solo")
        assert made.spec.id == "me/rot13-short-v0" and len(made.task) == 2
        assert agon_env.spec("rot13pkg.tasks:me/rot13-short-v0") is agon_env.spec("me/rot13-short-v0")
    finally:
        for i in ("me/rot13-v0", "me/rot13-short-v0"):
            _REGISTRY.pop(i, None)
            _FROM_ENTRY_POINTS.discard(i)
        for m in ("rot13pkg", "rot13pkg.tasks"):
            sys.modules.pop(m, None)
    with pytest.raises(ImportError, match=r"cannot import 'no_such_pkg_xyz\.tasks'.*is it installed"):
        agon_env.make("no_such_pkg_xyz.tasks:me/x-v0")
    with pytest.raises(KeyError, match="module:id"):
        agon_env.spec(":me/x-v0")


@pytest.mark.slow
def test_agon_train_runs_a_module_colon_id_from_another_folder(rot13_site):
    cwd, env = rot13_site
    flags = [
        *("--env", "rot13pkg.tasks:me/rot13-short-v0", "--model", "tiny", "--steps", "1"),
        *("--batch-problems", "1", "--n", "2", "--sampling.max-new-tokens", "8", "--threads", "1"),
        *("--heldout-problems", "0", "--time-budget-min", "0", "--no-progress", "--out-dir", "run"),
    ]
    r = _agon(["train", *flags], cwd, env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    import yaml

    assert yaml.safe_load((cwd / "run" / "config.yaml").read_text())["env"]["id"] == (
        "rot13pkg.tasks:me/rot13-short-v0"
    )
    assert (cwd / "run" / "metrics.jsonl").read_text().count("\n") == 1
