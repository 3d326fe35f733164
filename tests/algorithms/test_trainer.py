"""The trainer on the tiny in-process model: every plugin end to end, updates, NaN, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from algo_helpers import tiny_config, with_rewards

from agon_env import metric_names as M
from agon_env.algorithms.commands.train import main
from agon_env.algorithms.registry import algorithm_names, get_algorithm
from agon_env.algorithms.rollout import rollout
from agon_env.algorithms.trainer import Trainer
from agon_env.algorithms.update import Update
from agon_env.algorithms.validation import load_config, resolve
from agon_env.run_folder import read_metrics

HERE = Path(__file__).parent
TINY = [
    "--model",
    "tiny",
    "--imports",
    "parity_env",
    "--env",
    "test/parity-v0",
    "--batch-problems",
    "2",
    "--n",
    "2",
    "--sampling.max-new-tokens",
    "4",
    "--no-progress",
    "--lr",
    "1e-2",
    "--divergence-kl-rollouts",
    "2",
    "--threads",
    "1",
]


pytestmark = pytest.mark.usefixtures("parity_on_path")


def _cfg(tmp_path, **updates):
    return tiny_config(tmp_path, **updates)


@pytest.mark.parametrize("algo", algorithm_names())
def test_agon_train_runs_every_plugin(tmp_path, algo, capsys):
    run = tmp_path / algo
    assert main([*TINY, "--algo", algo, "--steps", "2", "--out-dir", str(run)]) == 0
    # The parity env is a wrapper, not a task with a held-out split: the run says so and ends.
    assert "held-out check skipped: test/parity-v0 builds a ParityEnv" in capsys.readouterr().out
    records = read_metrics(run)
    assert [r["step"] for r in records] == [0, 1]
    assert (run / "checkpoint.pt").is_file() and (run / "curves.png").is_file()
    assert (run / "config.yaml").is_file() and list((run / "tb").iterdir())
    samples = [json.loads(ln) for ln in (run / "samples.jsonl").read_text().splitlines()]
    roles = {"drafter"} | ({"challenger"} if get_algorithm(algo).env_mode != "solo" else set())
    assert {s["role"] for s in samples} == roles and {s["step"] for s in samples} == {0, 1}
    assert all("<|im_start|>" in s["prompt"] for s in samples)  # the rendered chat prompt
    for name in ("agent_a",) + (("agent_b",) if algo not in ("grpo", "self-refine") else ()):
        assert (run / "adapters" / name / "adapter_model.safetensors").is_file()
    plugin = get_algorithm(algo)
    for step, r in enumerate(records):
        assert r["nan_skipped"] == 0 and r["time/step"] >= r["time/rollout"] > 0
        assert r[M.PEAK_RSS] >= (records[step - 1][M.PEAK_RSS] if step else 1.0)  # a peak only grows
        seats = plugin.seats(step)
        # Who played which role is the plugin's schedule, and only its streams were trained.
        assert f"reward/{seats['drafter']}/drafter" in r
        two_turns = plugin.env_mode != "solo"
        assert (f"reward/{seats['challenger']}/challenger" in r) == two_turns
        assert ("conversion_rate" in r or "acc/drafter" in r) and ("reward/challenger" in r) == two_turns
        # Every stream has B groups, so the overall drop rate is the mean of the per-role ones.
        per_role = [r[f"groups_dropped/{role}"] for role in plugin.trained_roles]
        assert r["groups_dropped"] == pytest.approx(sum(per_role) / len(per_role))
        assert set(k for k in r if k.startswith("lr/")) == {f"lr/{a}" for a in plugin.adapters}
        # A challenger shown no draft (hidden-draft's none channel) reads nothing unusable.
        shown = plugin.env_mode in ("challenge", "self") and plugin.exchange != "none"
        assert ("draft_unusable" in r) == shown
    updated = {k.split("/", 1)[1] for r in records for k in r if k.startswith("loss/")}
    assert updated <= set(plugin.adapters) and updated, "at least one adapter was updated"


def test_existing_run_folder_is_refused_with_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    assert main([*TINY, "--steps", "1", "--out-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "already exists: pass --resume" in err


def test_incompatible_checkpoint_is_refused_before_any_step(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*TINY, "--steps", "1", "--out-dir", str(run)]) == 0
    before = (run / "metrics.jsonl").read_text()
    for extra in (["--model.lora-r", "8"], ["--algo", "grpo"]):
        assert main([*TINY, "--steps", "3", "--out-dir", str(run), "--resume", *extra]) == 2
        assert "is its own run" in capsys.readouterr().err  # before any model loads
    assert (run / "metrics.jsonl").read_text() == before


def test_time_budget_stops_cleanly(tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main([*TINY, "--algo", "grpo", "--steps", "50", "--time-budget-min", "0.0001", "--out-dir", str(run)])
        == 0
    )
    assert [r["step"] for r in read_metrics(run)] == [0]  # the first step always runs
    assert "time budget reached" in capsys.readouterr().out
    assert torch.load(run / "checkpoint.pt", weights_only=False)["step"] == 1
    assert (run / "adapters" / "agent_a").is_dir() and (run / "curves.png").is_file()


@pytest.mark.parametrize(
    ("role", "adapter", "other"), [("drafter", "agent_a", "agent_b"), ("challenger", "agent_b", "agent_a")]
)
def test_update_changes_only_its_adapter(tmp_path, role, adapter, other):
    tr = Trainer.build(resolve(_cfg(tmp_path)))
    frozen = {n: p.detach().clone() for n, p in tr.base.base_model.named_parameters() if "lora_" not in n}
    other_before = [p.detach().clone() for p in tr.base.parameters(other)]
    own_before = [p.detach().clone() for p in tr.base.parameters(adapter)]
    batch = rollout(tr.env, tr.agents, [0, 1], 4, drafter="agent_a")
    batch = with_rewards(batch, role, [float(i % 2) for i in range(8)])  # every group has variance
    sb, keep = tr.update.stream(batch, role)
    assert keep.all()
    stats = tr.update.apply(adapter, [sb], tr.optimizers[adapter], step=tr.step)
    assert stats[f"ratio_mean/{adapter}"] == pytest.approx(1.0, abs=1e-4)  # sampler and trainer agree
    assert any(not torch.equal(a, p) for a, p in zip(own_before, tr.base.parameters(adapter), strict=True))
    assert all(torch.equal(b, p) for b, p in zip(other_before, tr.base.parameters(other), strict=True))
    after = dict(tr.base.base_model.named_parameters())
    assert all(torch.equal(v, after[n]) for n, v in frozen.items())


def test_nan_loss_skips_the_update_and_is_counted(tmp_path):
    tr = Trainer.build(resolve(_cfg(tmp_path)))
    batch = with_rewards(rollout(tr.env, tr.agents, [0], 4, drafter="agent_a"), "drafter", [0, 1, 0, 1])
    sb, _ = tr.update.stream(batch, "drafter")
    sb.turns[0].completion.logprobs[0] = float("nan")
    before = [p.detach().clone() for p in tr.base.parameters("agent_a")]
    with pytest.warns(RuntimeWarning, match="update skipped"):
        tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=tr.step)
    assert tr.counters["nan_skipped"] == 1
    assert all(torch.equal(b, p) for b, p in zip(before, tr.base.parameters("agent_a"), strict=True))


def test_divergent_rivals(tmp_path):
    same = Trainer.build(resolve(_cfg(tmp_path, steps=1, divergence_kl_rollouts=4))).train_step()
    rivals = Trainer.build(
        resolve(
            _cfg(
                tmp_path,
                steps=3,
                divergence_kl_rollouts=4,
                **{"model.lora_b_init_std": 0.05},
                temperatures={"agent_b": 1.5},
            )
        )
    )
    # Step until agent_b has trained once (a step may drop all of its groups).
    apart = next(m for m in (rivals.train_step() for _ in range(3)) if "ratio_mean/agent_b" in m)
    assert same["divergence/kl"] == pytest.approx(0.0, abs=1e-9)  # B = 0: both adapters are the base
    assert apart["divergence/kl"] > 1e-4
    assert apart["ratio_mean/agent_b"] == pytest.approx(1.0, abs=1e-4)  # log-probs at agent_b's own T


def test_backend_sync_after_updates_and_restore(tmp_path, monkeypatch):
    from agon_env import runtime
    from agon_env.agents import HFBackend

    synced: list[str] = []

    class SyncingHF(HFBackend):  # stands in for vLLM, which keeps its own adapter copies
        def sync(self, name: str) -> None:
            synced.append(name)

    monkeypatch.setitem(runtime.BACKENDS, "hf", lambda run, base, device, continuous: SyncingHF(base))
    cfg = _cfg(tmp_path, algo="grpo", steps=2)
    tr = Trainer.build(resolve(cfg))
    m = tr.train_step()
    assert "loss/agent_a" in m and synced == ["agent_a"]
    (tmp_path / "run").mkdir()
    tr.save(tmp_path / "run")
    synced.clear()
    Trainer.build(resolve(cfg)).restore(tmp_path / "run")
    assert synced == ["agent_a"]  # restored weights are published before the next rollout


def _strip(records):
    return [{k: v for k, v in r.items() if not k.startswith(M.MACHINE)} for r in records]


def _run(args, **kw):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "agon_env.algorithms.commands.train", *TINY, *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def test_sigkill_and_resume_matches_an_uninterrupted_run(tmp_path):
    steps = ["--steps", "5", "--seed", "3"]
    straight = _run([*steps, "--out-dir", str(tmp_path / "a")])
    killed = _run([*steps, "--out-dir", str(tmp_path / "b")])
    metrics = tmp_path / "b" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and killed.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert killed.poll() is None, "the run finished before it could be killed; make it longer"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert straight.wait(timeout=300) == 0, straight.stderr.read().decode()
    done_before = len(read_metrics(tmp_path / "b"))
    assert 2 <= done_before < 5
    resumed = _run([*steps, "--out-dir", str(tmp_path / "b"), "--resume"])
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()
    a, b = _strip(read_metrics(tmp_path / "a")), _strip(read_metrics(tmp_path / "b"))
    assert [r["step"] for r in b] == [0, 1, 2, 3, 4]
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_an_adapter_trained_by_two_streams_takes_their_mean(tmp_path, monkeypatch):
    scales: dict[str, float] = {}
    original = Update.apply

    def spy(self, adapter, streams, optimizer, *, step, version=None, scale=1.0):
        scales[adapter] = scale
        return original(self, adapter, streams, optimizer, step=step, version=version, scale=scale)

    monkeypatch.setattr(Update, "apply", spy)
    Trainer.build(resolve(_cfg(tmp_path, algo="self-refine"))).train_step()
    assert scales == {"agent_a": 0.5}  # drafts and refinements: one stream's scale
    Trainer.build(resolve(_cfg(tmp_path, algo="agon"))).train_step()
    assert scales == {"agent_a": 1.0, "agent_b": 1.0}
    # The scale multiplies the loss (and so the gradient) exactly.
    losses = []
    for scale in (1.0, 0.5):
        tr = Trainer.build(resolve(_cfg(tmp_path)))
        batch = with_rewards(rollout(tr.env, tr.agents, [0], 4, drafter="agent_a"), "drafter", [0, 1, 0, 1])
        sb, _ = tr.update.stream(batch, "drafter")
        stats = original(tr.update, "agent_a", [sb], tr.optimizers["agent_a"], step=0, scale=scale)
        losses.append(stats["loss/agent_a"])
    assert losses[1] == pytest.approx(0.5 * losses[0], rel=1e-5)


BASE_ARGS = ["--model", "tiny", "--steps", "1", "--no-progress", "--threads", "1"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "no/such-model"], "model no/such-model: cannot load model"),
        (["--env", "agon/nope-v0"], "unknown env id 'agon/nope-v0'. Did you mean"),
        (["--env.kwargs", "difficulty=9"], "difficulty must be one of 1, 2, 2.5, 3, 4, 5; got 9"),
        (["--env.kwargs", "colour=9"], "unknown keyword 'colour'. Task keywords: difficulty"),
        (["--env", "agon/math-v0", "--env.kwargs", "path=/no/such.jsonl"], "dataset file not found"),
        (["--algo", "agonn"], "unknown algorithm 'agonn'. Did you mean 'agon'"),
    ],
)
def test_user_errors_are_one_line_and_leave_no_folder(tmp_path, capsys, monkeypatch, args, needle):
    import huggingface_hub.constants

    # The hub cannot be reached here: offline, a missing model is refused at once (~45 s of retries else).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    run = tmp_path / "run"
    assert main([*BASE_ARGS, *args, "--out-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.count("\n") == 0 and "Traceback" not in err, err
    assert not run.exists()


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(Exception, match=r"difficulty must be one of 1, 2, 2\.5"):
        main([*BASE_ARGS, "--env.kwargs", "difficulty=9", "--out-dir", str(tmp_path / "r"), "--debug"])


def test_a_run_whose_scorer_always_raises_stops_and_removes_its_folder(tmp_path, capsys):
    run = tmp_path / "run"
    args = [*BASE_ARGS, "--imports", "broken_env", "--env", "test/broken-scorer-v0", "--n", "2"]
    with pytest.warns(UserWarning, match="broken-scorer"):
        assert main([*args, "--batch-problems", "2", "--out-dir", str(run)]) == 2
    err = capsys.readouterr().err
    assert "score() raised on all" in err and "this scorer is broken on purpose" in err
    assert not run.exists()  # it failed before its first step: nothing to resume


def test_agents_get_their_tasks_prompt_family_or_the_configured_one(tmp_path):
    from agon_env.agents.prompts import PROMPT_FAMILIES
    from agon_env.algorithms.builders import SetupError
    from agon_env.envs.tasks.fixtures import write_mbpp_fixture

    code = {
        "env.id": "agon/mbpp-v0",
        "env.kwargs": {"path": str(write_mbpp_fixture(tmp_path / "mbpp.jsonl"))},
    }
    tr = Trainer.build(resolve(_cfg(tmp_path, **code)))
    assert tr.agents["agent_a"].prompts == PROMPT_FAMILIES["code-function"]
    tr = Trainer.build(
        resolve(_cfg(tmp_path, **code, **{"prompts.family": "math", "prompts.few_shot": False}))
    )
    assert tr.agents["agent_b"].prompts.drafter_system == PROMPT_FAMILIES["math"].drafter_system
    assert not tr.agents["agent_b"].prompts.few_shot
    with pytest.raises(SetupError, match="unknown prompt family 'poetry'"):
        Trainer.build(resolve(_cfg(tmp_path, **{"prompts.family": "poetry"})))


@pytest.mark.parametrize("extra", [{"model.gradient_checkpointing": True}, {"grpo.micro_batch_tokens": 16}])
def test_checkpointing_and_token_sized_micro_batches_do_not_change_the_update(tmp_path, extra):
    def grad_after_one_stream(**kw):
        tr = Trainer.build(resolve(_cfg(tmp_path, **kw)))
        assert tr.base.model.is_gradient_checkpointing == bool(kw.get("model.gradient_checkpointing"))
        batch = with_rewards(rollout(tr.env, tr.agents, [0, 1], 4, drafter="agent_a"), "drafter", [0, 1] * 4)
        sb, _ = tr.update.stream(batch, "drafter")
        stats = tr.update.apply("agent_a", [sb], tr.optimizers["agent_a"], step=tr.step)
        return stats["loss/agent_a"], [p.detach().clone() for p in tr.base.parameters("agent_a")]

    loss, params = grad_after_one_stream()
    loss2, params2 = grad_after_one_stream(**extra)
    assert loss2 == pytest.approx(loss, rel=1e-5, abs=1e-7)
    # One Adam step moves each weight by ~lr (1e-2 here) whatever its gradient's size, so float
    # round-off in a near-zero gradient shows at ~1e-6; a real difference in the update is ~lr.
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(params, params2, strict=True))


def test_a_budget_that_cannot_fit_max_seq_len_is_refused():
    from agon_env.config import ConfigError

    with pytest.raises(ConfigError, match="leaves no room for a prompt"):
        load_config(None, {"sampling.max_new_tokens": 4096, "model.max_seq_len": 4096})


TINY_ARITH = [
    "--model",
    "tiny",
    "--env.kwargs",
    "difficulty=1",
    "--batch-problems",
    "2",
    "--n",
    "2",
    "--sampling.max-new-tokens",
    "4",
    "--no-progress",
    "--threads",
    "1",
]
"""The tiny model on a real task with a test split (the parity env has none): the held-out check runs."""


def test_the_run_ends_with_a_held_out_check(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*TINY_ARITH, "--steps", "1", "--heldout-problems", "5", "--out-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "held-out check" in out and "minus base" in out and "end − start" in out
    result = json.loads((run / "heldout.json").read_text())
    assert len(result["problem_ids"]) == 5 and result["disjoint"]["test_and_training"] == {"this run": 0}
    assert set(result["policies"]) == {"base", "agent_a", "agent_b"}
    assert all(len(p["outcomes"]) == 5 for p in result["policies"].values())


def test_the_held_out_check_samples_each_adapter_at_its_own_temperature(tmp_path, monkeypatch):
    from agon_env.agents.hf_backend import HFBackend
    from agon_env.evaluation import heldout
    from agon_env.vocabulary import REFERENCE

    phase = ["training"]
    seen: dict[tuple[str, str], set] = {}
    generate, check, first = HFBackend.generate, heldout.heldout_check, heldout.heldout_base

    def spy(self, prompts, params=None, adapter=None, seeds=None):
        out = generate(self, prompts, params, adapter=adapter, seeds=seeds)
        seen.setdefault((phase[0], adapter), set()).update(c.temperature for c in out)
        return out

    def heldout_phase(*args, **kwargs):
        phase[0] = "held-out"
        return check(*args, **kwargs)

    def base_phase(*args, **kwargs):  # the base's half runs before training (the budget's reserve)
        phase[0] = "held-out"
        try:
            return first(*args, **kwargs)
        finally:
            phase[0] = "training"

    monkeypatch.setattr(HFBackend, "generate", spy)
    monkeypatch.setattr(heldout, "heldout_check", heldout_phase)
    monkeypatch.setattr(heldout, "heldout_base", base_phase)
    argv = ["--steps", "1", "--heldout-problems", "5", "--sampling.temperature", "0.9"]
    temps = ["--temperatures", "agent_a=0.5", "agent_b=1.5"]
    assert main([*TINY_ARITH, *argv, *temps, "--out-dir", str(tmp_path / "run")]) == 0
    assert seen[("training", "agent_a")] == {0.5} and seen[("training", "agent_b")] == {1.5}
    assert seen[("held-out", "agent_a")] == {0.5} and seen[("held-out", "agent_b")] == {1.5}
    assert seen[("held-out", REFERENCE)] == {0.9}  # the untrained base at the run's temperature
    rows = json.loads((tmp_path / "run" / "heldout.json").read_text())["policies"]
    assert {n: r["temperature"] for n, r in rows.items()} == {"base": 0.9, "agent_a": 0.5, "agent_b": 1.5}


def test_a_run_out_of_budget_skips_the_held_out_check_and_says_how_to_run_it(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*TINY_ARITH, "--steps", "5", "--time-budget-min", "0.0001", "--out-dir", str(run)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "held-out check skipped" in out and f"agon eval {run} --methods base-few-shot standalone" in out
    assert not (run / "heldout.json").exists()
