"""`agon eval` and `agon plot` end to end on the tiny in-process model (seconds, no files needed)."""

import json

import pytest

from agon_env.cli import main
from agon_env.envs.tasks.base import content_split
from agon_env.envs.tasks.data import local_file

pytest.importorskip("peft")


def agon(*argv):
    return main([str(a) for a in argv])


TINY = ["--problems", "4", "--val-problems", "2", "--max-new-tokens", "6", "--quiet"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run folder as a killed `agon train` leaves it: config.yaml, metrics.jsonl (its last line
    torn), adapters/<name>/."""
    from agon_env.agents.adapters import LoraSpec, SharedBase

    run = tmp_path_factory.mktemp("runs") / "agon-seed0"
    run.mkdir()
    base = SharedBase.from_source("tiny")
    for i, name in enumerate(("agent_a", "agent_b")):
        base.add_adapter(name, LoraSpec(r=4, alpha=8, init_seed=i, init_b_std=0.05))
        base.save(name, run / "adapters" / name)
    (run / "config.yaml").write_text(
        "algo: agon\nmodel: {name: tiny, lora_r: 4, lora_alpha: 8}\n"
        "env: {id: agon/arith-v0, kwargs: {difficulty: 1}}\nsampling: {temperature: 1.0, max_new_tokens: 6}\n"
    )
    rows = [
        {"step": s, "acc/agent_a/drafter": 0.1 * s, "win_rate/agent_a": 0.2, "len_tokens/drafter": 6}
        for s in range(4)
    ]
    # Killed while logging a fifth step: its line is cut off, and the run still evaluates and plots.
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 4, "acc/ag')
    return run


def test_eval_on_a_run_writes_every_mode_with_intervals(tiny_run, tmp_path):
    out = tmp_path / "ev"
    assert agon("eval", tiny_run, *TINY, "--cache-dir", tmp_path / "cache", "--out", out) == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["data"]["task_kwargs"]["difficulty"] == 1  # the run's own task
    run = report["runs"][0]
    families = {m["family"] for m in run["methods"].values()}
    assert families == {"base-few-shot", "base-zero-shot", "moa", "standalone", "self-cascade", "cascade"}
    for m in run["methods"].values():
        r = m["pass@1"]
        assert r["trials"] == 4 and 0 <= r["low"] <= r["high"] <= 1
        assert m["length_unit"] == "tokens" and 0 < m["mean_length"] <= 12
    assert run["selection"]["chosen"] in run["methods"]
    assert "adapters" in run["complementarity"] and "base" in run["complementarity"]
    md = (out / "eval.md").read_text()
    assert "| Standalone agent_a |" in md and "chosen on validation" in md and "Jaccard" in md

    # The base's samples were cached on disk: a second evaluation generates no new base samples.
    def base_samples() -> int:  # one line per cached completion, after each file's identity line
        return sum(len(f.read_text().splitlines()) - 1 for f in (tmp_path / "cache").glob("*.jsonl"))

    before = base_samples()
    assert before >= 2 * 4  # few-shot base and MoA turns of 4 test problems, at least
    assert agon("eval", tiny_run, *TINY, "--cache-dir", tmp_path / "cache", "--out", tmp_path / "ev2") == 0
    assert base_samples() == before
    from agon_env.evaluation.methods import METHODS

    again = json.loads((tmp_path / "ev2" / "eval.json").read_text())["runs"][0]["methods"]
    on_base = [mid for mid, m in again.items() if METHODS[m["family"]].uses_base]
    assert on_base and all(again[mid]["episodes"] == run["methods"][mid]["episodes"] for mid in on_base)


def test_eval_falls_back_to_the_checkpoint(tiny_run, tmp_path):
    import shutil

    import torch

    from agon_env.agents.adapters import SharedBase

    run = tmp_path / "killed"
    shutil.copytree(tiny_run, run)
    base = SharedBase.from_source("tiny")
    for name in ("agent_a", "agent_b"):
        base.load(name, run / "adapters" / name)
    torch.save(
        {"adapters": {n: base.adapter_state_dict(n) for n in ("agent_a", "agent_b")}}, run / "checkpoint.pt"
    )
    shutil.rmtree(run / "adapters")
    assert agon("eval", run, *TINY, "--no-cache", "--methods", "standalone") == 0
    report = json.loads((run / "eval" / "eval.json").read_text())
    assert set(report["runs"][0]["methods"]) == {"standalone:agent_a", "standalone:agent_b"}


def test_eval_of_the_untrained_base_and_bad_input(tmp_path, capsys):
    out = tmp_path / "base"
    assert agon("eval", "--model", "tiny", *TINY, "--no-cache", "--out", out, "--seeds", "0", "1") == 0
    report = json.loads((out / "eval.json").read_text())
    assert set(report["runs"][0]["methods"]) == {"base-few-shot", "base-zero-shot", "moa"}
    assert report["runs"][0]["methods"]["base-few-shot"]["pass@1"]["trials"] == 8
    assert agon("eval", tmp_path / "nope", *TINY) == 2
    assert "no such run folder" in capsys.readouterr().err
    assert agon("eval", "--model", "tiny", "--problems", "5", "--env", "agon/arith-v1", "--quiet") == 2
    assert "agon/arith-v0" in capsys.readouterr().err  # suggests the closest id


def test_eval_on_a_local_dataset_with_field_mapping(tmp_path):
    data = tmp_path / "qa.jsonl"
    rows = [{"q": f"What is {i} + 1?", "a": str(i + 1)} for i in range(8)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "ds"
    argv = [
        "--data",
        data,
        "--question-field",
        "q",
        "--answer-field",
        "a",
        "--model",
        "tiny",
        "--methods",
        "base-few-shot",
    ]
    assert agon("eval", *argv, *TINY, "--no-cache", "--out", out) == 0
    report = json.loads((out / "eval.json").read_text())
    # A single file has no official splits: its test split is carved by content.
    carved = sum(content_split(r["q"]) == "test" for r in rows)
    assert report["data"]["env"] == "agon/math-v0" and report["data"]["task_size"] == carved < 8
    assert report["data"]["disjoint"]["test_and_validation"] == 0


def test_plot_on_a_run_and_its_eval(tiny_run, tmp_path, capsys):
    assert agon("eval", tiny_run, *TINY, "--no-cache", "--methods", "base-few-shot", "standalone") == 0
    assert agon("plot", tiny_run, "--out", tmp_path / "png") == 0
    printed = capsys.readouterr().out.split()
    assert sorted(p.rsplit("/", 1)[-1] for p in printed if p.endswith(".png")) == [
        "accuracy_vs_length.png",
        "trace_length.png",
        "training_curves.png",
        "win_conversion.png",
    ]
    assert agon("plot", tmp_path, "--out", tmp_path / "png2") == 2
    assert "no metrics.jsonl" in capsys.readouterr().err


def test_eval_on_the_training_split_is_refused_unless_allowed(tiny_run, tmp_path, capsys):
    argv = ["eval", tiny_run, *TINY, "--no-cache", "--methods", "standalone", "--out", tmp_path / "x"]
    assert agon(*argv, "--split", "train") == 2
    err = capsys.readouterr().err
    assert "test prompts occur in the training pool of" in err and "--allow-overlap" in err
    assert not (tmp_path / "x").exists()
    assert agon(*argv, "--split", "train", "--allow-overlap") == 0
    check = json.loads((tmp_path / "x" / "eval.json").read_text())["data"]["disjoint"]
    assert check["allowed_overlap"] and check["test_and_training"][str(tiny_run)] == 4
    assert agon(*argv) == 0  # the test split is disjoint from the run's training pool
    check = json.loads((tmp_path / "x" / "eval.json").read_text())["data"]["disjoint"]
    assert check["test_and_training"][str(tiny_run)] == 0 and check["test_and_validation"] == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--env", "agon/nope-v0"], "agon eval: unknown env id 'agon/nope-v0'. Did you mean"),
        (
            ["--env-kwarg", "difficulty=9"],
            "agon eval: env agon/arith-v0 with kwargs {'difficulty': 9}: difficulty must be one of 1, 2",
        ),
        (["--data", "/no/such.jsonl"], "agon eval: dataset file not found: /no/such.jsonl"),
        (["/no/such/run"], "agon eval: /no/such/run: no such run folder"),
    ],
)
def test_eval_user_errors_are_one_line(tmp_path, capsys, args, needle):
    assert agon("eval", *args, "--model", "tiny", *TINY, "--no-cache", "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(needle) and err.count("\n") == 0, err
    assert not (tmp_path / "o").exists()


def _run_like(tiny_run, folder, sampling, model="tiny", temperatures=None):
    """A run like ``tiny_run`` with its own config (another sampling, model, temperatures) and its
    own adapters: a copy of ``tiny_run``'s would be one run twice, which eval refuses."""
    from agon_env.agents.adapters import LoraSpec, SharedBase

    base = SharedBase.from_source("tiny")
    seed = 2 + sum(map(ord, folder.name))  # tiny_run's are seeds 0 and 1
    for i, name in enumerate(("agent_a", "agent_b")):
        base.add_adapter(name, LoraSpec(r=4, alpha=8, init_seed=seed + i, init_b_std=0.05))
        base.save(name, folder / "adapters" / name)
    extra = f"temperatures: {json.dumps(temperatures)}\n" if temperatures else ""
    (folder / "config.yaml").write_text(
        f"algo: agon\nmodel: {{name: {model}, lora_r: 4, lora_alpha: 8}}\n"
        f"env: {{id: agon/arith-v0, kwargs: {{difficulty: 1}}}}\nsampling: {json.dumps(sampling)}\n{extra}"
    )
    return folder


def _spy_generate(monkeypatch):
    """Every HF generate call as (adapter, params it received, completions it returned)."""
    from agon_env.agents.hf_backend import HFBackend

    calls = []
    original = HFBackend.generate

    def generate(self, prompts, params=None, adapter=None, seeds=None):
        out = original(self, prompts, params, adapter=adapter, seeds=seeds)
        calls.append((adapter, params, out))
        return out

    monkeypatch.setattr(HFBackend, "generate", generate)
    return calls


def test_each_run_is_evaluated_with_its_own_settings(tiny_run, tmp_path, monkeypatch):
    from agon_env.vocabulary import REFERENCE

    short = _run_like(tiny_run, tmp_path / "short", {"temperature": 1.0, "max_new_tokens": 3})
    long = _run_like(
        tiny_run,
        tmp_path / "long",
        {"temperature": 1.0, "max_new_tokens": 7},
        temperatures={"agent_a": 0.5, "agent_b": 1.5},
    )
    calls = _spy_generate(monkeypatch)
    argv = ["--problems", "4", "--val-problems", "2", "--quiet", "--no-cache", "--out", tmp_path / "ev"]
    assert agon("eval", short, long, *argv, "--methods", "base-few-shot", "standalone", "cascade") == 0
    # What generation received and what each completion says it was sampled at.
    seen: dict[str, set] = {}
    for adapter, params, out in calls:
        seen.setdefault(adapter, set()).update((params.max_new_tokens, c.temperature) for c in out)
        assert all(len(c.completion_ids) <= params.max_new_tokens for c in out)
    assert seen == {
        "r0_agent_a": {(3, 1.0)},
        "r0_agent_b": {(3, 1.0)},
        "r1_agent_a": {(7, 0.5)},
        "r1_agent_b": {(7, 1.5)},
        REFERENCE: {(3, 1.0), (7, 1.0)},  # the base of each run at that run's sampling
    }
    report = json.loads((tmp_path / "ev" / "eval.json").read_text())
    first, second = (r["settings"] for r in report["runs"])
    assert first["sampling"]["max_new_tokens"] == 3 and second["sampling"]["max_new_tokens"] == 7
    assert first["temperatures"] == {"base": 1.0, "agent_a": 1.0, "agent_b": 1.0}
    assert second["temperatures"] == {"base": 1.0, "agent_a": 0.5, "agent_b": 1.5}
    assert first["prompts"] == second["prompts"] == {"family": "arithmetic", "few_shot": True}
    assert report["sampling"] is None and report["prompts"] == first["prompts"]  # shared only where equal
    longest = max(e["tokens"] for e in report["runs"][0]["methods"]["standalone:agent_a"]["episodes"])
    assert longest <= 3
    md = (tmp_path / "ev" / "eval.md").read_text()
    assert "Sampling: each run's own (below)" in md
    assert "temperature base 1, agent_a 0.5, agent_b 1.5" in md and "max_new_tokens 7" in md


def test_base_samples_are_shared_only_between_runs_with_the_same_settings(tiny_run, tmp_path):
    other = _run_like(tiny_run, tmp_path / "other", {"temperature": 1.0, "max_new_tokens": 3})
    same = _run_like(tiny_run, tmp_path / "same", {"temperature": 1.0, "max_new_tokens": 6})
    argv = ["--problems", "4", "--val-problems", "2", "--quiet", "--methods", "base-few-shot"]
    out = tmp_path / "ev"
    assert agon("eval", tiny_run, other, same, *argv, "--cache-dir", tmp_path / "cache", "--out", out) == 0
    caches = [r["cache"] for r in json.loads((out / "eval.json").read_text())["runs"]]
    # 4 problems, two base samples each (the second is the blind-spot baseline).
    assert caches[0] == {"hits": 0, "misses": 8}
    assert caches[1] == {"hits": 0, "misses": 8}  # another max_new_tokens: none of the first run's samples
    assert caches[2] == {"hits": 8, "misses": 0}  # the first run's settings: all of them


def test_runs_on_different_base_models_are_refused(tiny_run, tmp_path, capsys):
    other = _run_like(tiny_run, tmp_path / "other", {"max_new_tokens": 6}, model="/no/such/base")
    assert agon("eval", tiny_run, other, *TINY, "--no-cache", "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("agon eval: the runs have different base models") and err.count("\n") == 0
    assert f"{other} on /no/such/base" in err and not (tmp_path / "o").exists()


def test_a_temperature_on_the_command_line_is_every_policys():
    from agon_env.algorithms.validation import resolve
    from agon_env.config import from_dict

    cfg = from_dict({"sampling": {"temperature": 0.9}, "temperatures": {"agent_b": 1.5}})
    run = resolve(cfg)
    kept = run.with_sampling(max_new_tokens=5, temperature=None)
    assert kept.sampling["agent_b"].temperature == 1.5 and kept.sampling["agent_a"].temperature == 0.9
    assert kept.sampling["base"].max_new_tokens == 5 and kept.config.sampling.max_new_tokens == 5
    greedy = run.with_sampling(temperature=0.0)
    assert greedy.sampling["agent_b"].temperature == greedy.sampling["agent_a"].temperature == 0.0
    assert cfg.temperatures == {"agent_b": 1.5} and cfg.sampling.temperature == 0.9  # the run's own untouched


def _held_out(env_id, **kwargs):
    from agon_env.evaluation.splits import check_heldout, load_eval_data, training_pool

    data = load_eval_data(env_id, **kwargs)  # agon eval's defaults: 100 test, 50 validation problems
    found = check_heldout(data, [("a run", training_pool(env_id, {}))])
    return data, found


@pytest.mark.skipif(local_file("mbpp.jsonl") is None, reason="mbpp.jsonl not found under ../shared/data")
def test_mbpp_eval_builds_with_the_default_validation_problems():
    data, found = _held_out("agon/mbpp-v0")
    assert len(data.test.indices) == 100 and len(data.validation.indices) == 50
    assert all(11 <= data.test.task[i].meta["task_id"] <= 510 for i in data.test.indices)
    assert all(511 <= data.validation.task[i].meta["task_id"] <= 600 for i in data.validation.indices)
    assert found["test_and_validation"] == 0 and found["test_and_training"] == {"a run": 0}


@pytest.mark.skipif(local_file("codecontests_sample.jsonl") is None, reason="no codecontests sample")
def test_codecontests_eval_is_held_out_from_a_default_training_run():
    data, found = _held_out("agon/codecontests-v0")
    # The carved splits hold 46 (test) and 21 (validation) distinct statements: a few appear twice.
    assert len(data.test.indices) == 46 and len(data.validation.indices) == 21
    assert found["test_and_validation"] == 0 and found["test_and_training"] == {"a run": 0}


def test_humaneval_eval_is_test_only(tmp_path, capsys):
    from agon_env.evaluation.splits import check_heldout, load_eval_data

    data = load_eval_data("agon/humaneval-v0", problems=164, val_problems=0)
    assert len(data.test.indices) == 164 and check_heldout(data)["test_and_validation"] == 0
    assert agon("eval", "--env", "agon/humaneval-v0", "--model", "tiny", "--quiet", "--out", tmp_path) == 2
    err = capsys.readouterr().err
    assert "HumanEval is a test set only" in err and "--val-problems 0" in err
