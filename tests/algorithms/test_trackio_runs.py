"""trackio's run per run folder: a unique name kept in the folder, one row per step after a resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from pathlib import Path
from agon_env.algorithms.trackers import Trackio, trackio_name
from trackio.sqlite_storage import SQLiteStorage

tmp = Path(sys.argv[1])
a, b, old = tmp / "a" / "run", tmp / "b" / "run", tmp / "old" / "run"
for folder in (a, b, old):
    folder.mkdir(parents=True)
names = {}
for folder in (a, b):  # two folders named run, each a fresh run
    t = Trackio(folder, {"lr": 1e-4}, 0)
    for step in range(4):
        t.log(step, {"x": float(step)}, [])
    t.close()
    names[str(folder)] = t.name
# a's run killed after step 3 with its checkpoint at step 2: resumed, it trains 2 and 3 again.
t = Trackio(a, {"lr": 1e-4}, 2)
t.catch_up([{"step": 0, "x": 0.0}, {"step": 1, "x": 1.0}])
for step in range(2, 6):
    t.log(step, {"x": 10.0 + step}, [])
t.close()
(old / "checkpoint.pt").write_bytes(b"")  # a run resumed from before the name file: its old name
names["old"], _ = trackio_name(old)
rows = {n: [(r["step"], r["x"]) for r in SQLiteStorage.get_logs("agon-runs", n)] for n in names.values()}
kept = {str(f): (f / Trackio.NAME_FILE).read_text().strip() for f in (a, b)}
print(json.dumps({"names": names, "rows": rows, "kept": kept}))
"""


def test_two_folders_named_run_are_two_trackio_runs_and_a_resume_holds_each_step_once(tmp_path):
    pytest.importorskip("trackio", reason="trackio is an optional extra: pip install 'agon-env[track]'")
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "TRACKIO_PROJECT": "agon-runs"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    a, b = str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run")
    name_a, name_b = out["names"][a], out["names"][b]
    # Issue 58: both were "run", one trackio run, which resume's catch-up looked up by name.
    assert name_a != name_b and all(
        n.startswith("run-") and len(n) == len("run-") + 6 for n in (name_a, name_b)
    )
    assert out["kept"] == {a: name_a, b: name_b}  # in the folder, for a resume to reuse
    assert out["rows"][name_b] == [[s, float(s)] for s in range(4)]
    # One row per step, steps 2 and 3 as the resumed run logged them (trackio held them twice).
    assert sorted(out["rows"][name_a]) == [[0, 0.0], [1, 1.0], [2, 12.0], [3, 13.0], [4, 14.0], [5, 15.0]]
    assert out["names"]["old"] == "run"


@pytest.mark.slow
def test_after_kill_9_and_resume_trackio_holds_each_step_once(tmp_path):
    pytest.importorskip("trackio", reason="trackio is an optional extra: pip install 'agon-env[track]'")
    import signal
    import time

    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "TRACKIO_PROJECT": "agon-kill"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    flags = [
        *("--model", "tiny", "--steps", "8", "--report-to", "trackio", "--save-every", "3"),
        *("--batch-problems", "1", "--n", "2", "--sampling.max-new-tokens", "8", "--threads", "1"),
        *("--heldout-problems", "0", "--time-budget-min", "0", "--no-progress", "--out-dir", "run"),
    ]
    command = [sys.executable, "-m", "agon_env.cli", "train", *flags]
    run = tmp_path / "run"
    first = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    # Killed once step 3 is logged and trackio has had a moment to store it: the checkpoint is at
    # step 3, so step 3 is trained and logged again. On 86f3fbc trackio then held
    # [0, 1, 2, 3, 3, 4, 5, 6, 7].
    while time.monotonic() < deadline and first.poll() is None:
        metrics = run / "metrics.jsonl"
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    assert first.poll() is None, "the run ended before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    r = subprocess.run(
        [*command, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    name = (run / Path("trackio-run-name.txt")).read_text().strip()
    check = (
        "import json\nfrom trackio.sqlite_storage import SQLiteStorage\n"
        f"print(json.dumps([r['step'] for r in SQLiteStorage.get_logs('agon-kill', {name!r})]))\n"
    )
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(json.loads(out.stdout.strip().splitlines()[-1])) == list(range(8))
