"""The same unit trained anywhere is the same unit: its adapter folders byte for byte, its
training rewards, and what its adapters sample when evaluated (issue #47, item 1).

On 18b19e3 a run's ``adapter_config.json`` listed ``target_modules`` in set order, which
follows ``PYTHONHASHSEED``, and the evaluator seeded an adapter's samples with its run
folder's absolute path: the same adapters, evaluated from two folders (a unit resumed or run
by Ray elsewhere, a study rerun in another directory), drew different completions.

Each run and each evaluation is its own process under its own hash seed, in its own folder.
The task trains on ``test/parity-v0`` (reward = parity of the reply's length, so the tiny
model's rewards are not all 0 and its adapters move); the evaluation samples the adapters on
``agon/arith-v0`` (the parity env is no task ``agon eval`` reads) and takes each completion's
outcome as the parity task scores it, its length being even (the tiny model never writes an
``<answer>``, so arith's own outcomes would all be 0, trivially equal).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

TINY = ["--model", "tiny", "--imports", "parity_env", "--env", "test/parity-v0", "--batch-problems", "2"]
TINY += ["--n", "2", "--sampling.max-new-tokens", "8", "--no-progress", "--threads", "1", "--steps", "2"]
TINY += ["--heldout-problems", "0", "--time-budget-min", "0", "--divergence-kl-rollouts", "0"]

EVALUATE = """
import json, sys
from agon_env.evaluation.evaluate import Evaluator
from agon_env.evaluation.runs import PolicyLoader, settings_for
from agon_env.evaluation.splits import load_eval_data
from agon_env.run_folder import load_resolved

data = load_eval_data("agon/arith-v0", {}, "test", 12, 2, 0)
settings = settings_for(load_resolved(sys.argv[1]), data.test.task, max_new_tokens=16)
policies = PolicyLoader("cpu").run_policies(sys.argv[1], settings)
res = Evaluator(data, seeds=[0], methods=["standalone"], blind_spots=False).evaluate(policies)
print(json.dumps({m: [e["chars"] for e in v["episodes"]] for m, v in res["methods"].items()}))
"""

# Imported by the run (``--imports``): ends the process right after its first checkpoint, as a
# ``kill -9`` between steps would, so the run must be resumed to finish.
DIE_AFTER_FIRST_CHECKPOINT = """
import os
from pathlib import Path
from agon_env.algorithms import trainer

ARMED = Path(__file__).with_name("armed")  # once: the resumed run imports this module too
_save = trainer.save_checkpoint

def _save_then_die(*args, **kwargs):
    _save(*args, **kwargs)
    if ARMED.exists():
        ARMED.unlink()
        os._exit(137)

trainer.save_checkpoint = _save_then_die
"""


def _env(hash_seed: int, *extra: Path) -> dict[str, str]:
    path = os.pathsep.join(map(str, [ROOT, HERE, *extra]))
    return {**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def _agon(args: list[str], hash_seed: int, cwd: Path, *extra: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agon_env.cli", *args],
        env=_env(hash_seed, *extra),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def train(run: Path, hash_seed: int) -> Path:
    run.parent.mkdir(parents=True, exist_ok=True)
    done = _agon(["train", *TINY, "--out-dir", str(run)], hash_seed, run.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return run


def adapter_files(run: Path) -> dict[str, bytes]:
    folder = run / "adapters"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def rewards(run: Path) -> list[list[float]]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [[r[k] for k in sorted(r) if k.startswith("reward")] for r in rows]


def completions(run: Path, hash_seed: int, *extra: Path) -> dict[str, list[int]]:
    """Each adapter's per-episode completion lengths, evaluated in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", EVALUATE, str(run)],
        env=_env(hash_seed, *extra),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def parity_outcomes(chars: dict[str, list[int]]) -> dict[str, list[int]]:
    return {m: [int(n % 2 == 0) for n in lengths] for m, lengths in chars.items()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory.mktemp("one") / "run", hash_seed=1)


def assert_same_unit(run: Path, other: Path, *extra: Path) -> None:
    files = adapter_files(run)
    assert {f for f in files if f.endswith("adapter_config.json")}, "no adapter folder written"
    assert files == adapter_files(other), [f for f in files if files[f] != adapter_files(other).get(f)]
    assert rewards(run) == rewards(other)
    ours, theirs = completions(run, hash_seed=3), completions(other, 4, *extra)
    assert set(ours) == {"standalone:agent_a", "standalone:agent_b"}
    outcomes = parity_outcomes(ours)
    # Not trivially equal: the outcomes vary, and the two adapters sample differently.
    assert 0 < sum(map(sum, outcomes.values())) < sum(map(len, outcomes.values()))
    assert ours["standalone:agent_a"] != ours["standalone:agent_b"]
    assert ours == theirs
    assert outcomes == parity_outcomes(theirs)


def test_a_unit_trained_under_another_hash_seed_in_another_folder_is_the_same(
    uninterrupted: Path, tmp_path: Path
) -> None:
    assert_same_unit(uninterrupted, train(tmp_path / "two" / "run", hash_seed=2))


def test_a_resumed_unit_is_the_uninterrupted_one(uninterrupted: Path, tmp_path: Path) -> None:
    (tmp_path / "die_after_first_checkpoint.py").write_text(DIE_AFTER_FIRST_CHECKPOINT)
    (tmp_path / "armed").touch()
    run = tmp_path / "run"
    killed = _agon(
        ["train", *TINY, "--imports", "parity_env", "die_after_first_checkpoint", "--out-dir", str(run)],
        5,
        tmp_path,
        tmp_path,
    )
    assert killed.returncode == 137 and (run / "checkpoint.pt").is_file(), killed.stderr[-3000:]
    assert not (run / "adapters").exists()
    resumed = _agon(["train", "--out-dir", str(run), "--resume"], 6, tmp_path, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_unit(uninterrupted, run, tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (the study-ray extra)")
def test_a_unit_trained_as_a_ray_task_is_the_local_one(uninterrupted: Path, tmp_path: Path) -> None:
    """The unit's run as a task on a local Ray cluster, as ``--launcher ray`` starts one
    (:func:`agon_env.study.launchers.ray`: a child process of a Ray worker)."""
    import ray

    run = tmp_path / "ray" / "run"
    run.parent.mkdir()
    cmd, env = [sys.executable, "-m", "agon_env.cli", "train", *TINY, "--out-dir", str(run)], _env(7)

    def task() -> tuple[int, str]:
        done = subprocess.run(cmd, env=env, cwd=run.parent, capture_output=True, text=True, check=False)
        return done.returncode, done.stderr[-3000:]

    ray.init(include_dashboard=False, log_to_driver=False, num_cpus=1)
    try:
        rc, err = ray.get(ray.remote(num_cpus=1)(task).remote())
    finally:
        ray.shutdown()
    assert rc == 0, err
    assert_same_unit(uninterrupted, run)
