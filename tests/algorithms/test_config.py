"""Config: TrainConfig() is the default run; presets, command-line flags and up-front validation."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from pathlib import Path

import pytest
import yaml

from agon_env.agents.protocol import SamplingParams
from agon_env.algorithms.commands.train import main, parse_train_args
from agon_env.algorithms.validation import load_config, resolve
from agon_env.config import (
    ConfigError,
    EnvConfig,
    GRPOConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    from_dict,
    leaf_keys,
    preset_names,
    to_dict,
)
from agon_env.run_folder import load_run_config


def _cli(*argv: str) -> TrainConfig:
    return parse_train_args(argv)[0].config


def _documented(cls: type) -> set[str]:
    """Fields followed by a docstring in the source of ``cls`` or a dataclass it inherits from
    (what tyro shows as help: it reads the bases' docstrings too)."""
    out: set[str] = set()
    for base in (b for b in cls.__mro__ if dataclasses.is_dataclass(b)):
        body = ast.parse(textwrap.dedent(inspect.getsource(base))).body[0].body  # type: ignore[attr-defined]
        out |= {
            a.target.id
            for a, b in itertools.pairwise(body)
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
        }
    return out


@pytest.mark.parametrize(
    "cls", [TrainConfig, ModelConfig, EnvConfig, SamplingParams, GRPOConfig, OptimConfig]
)
def test_every_field_has_a_docstring(cls):
    sections = {"model", "env", "grpo", "optim"}  # their class is the help
    missing = {f.name for f in dataclasses.fields(cls)} - _documented(cls) - sections
    assert not missing, f"{cls.__name__}: {sorted(missing)} have no docstring"


def test_no_arguments_is_trainconfig_exactly():
    assert _cli() == TrainConfig() == load_config()
    cfg = TrainConfig()
    assert (cfg.model.name, cfg.env.id, cfg.algo, cfg.env.kwargs) == (
        "smollm2-135m",
        "agon/arith-v0",
        "agon",
        {},
    )


def test_print_config_without_arguments_is_the_dataclass_defaults(capsys):
    assert main(["--print-config"]) == 0
    out = capsys.readouterr().out
    assert out == yaml.safe_dump(to_dict(TrainConfig()), sort_keys=False)
    assert "stop:\n  - </answer>" in out  # a tuple dumps as a YAML list ...
    assert from_dict(yaml.safe_load(out)) == TrainConfig()  # ... and loads back as the tuple


def test_paper_preset():
    assert "paper-qwen3-0.6b-deepmath" in preset_names()
    cfg = load_config("paper-qwen3-0.6b-deepmath")
    assert cfg.model.name == "Qwen/Qwen3-0.6B" and cfg.model.backend == "vllm"
    assert (cfg.model.lora_r, cfg.model.lora_alpha) == (16, 32)
    assert cfg.env.id == "agon/deepmath-v0" and cfg.env.kwargs["min_difficulty"] == 8
    assert cfg.env.kwargs["drop_binary"] is True
    assert (cfg.optim.lr, cfg.optim.schedule, cfg.optim.warmup_ratio) == (5e-5, "linear", 0.1)
    assert (cfg.grpo.num_generations, cfg.algo, cfg.env.lam) == (8, "agon", 0.5)
    assert (cfg.time_budget_min, cfg.sampling.temperature, cfg.sampling.max_new_tokens) == (0, 1.0, 10240)
    assert cfg.sampling.max_new_tokens >= 8192 and cfg.model.gradient_checkpointing  # the paper's traces
    assert (
        cfg.model.chat_template_kwargs == {"enable_thinking": True} and cfg.sampling.stop_after == "</think>"
    )
    assert cfg.sampling.max_new_tokens < cfg.model.max_seq_len and not cfg.prompts.few_shot
    assert _cli("--config", "paper-qwen3-0.6b-deepmath") == cfg


def test_paper_preset_lists_only_what_differs_from_the_defaults():
    data = yaml.safe_load(Path("configs/paper-qwen3-0.6b-deepmath.yaml").read_text())
    default = to_dict(TrainConfig())
    for key, value in data.items():
        pairs = value.items() if isinstance(value, dict) else [(None, value)]
        for leaf, v in pairs:
            assert (default[key][leaf] if leaf else default[key]) != v, f"{key}.{leaf} restates the default"


def test_command_line_overrides():
    cfg = _cli("--optim.lr", "1e-4", "--algo", "coop", "--optim.warmup-ratio", "0.2", "--model", "tiny")
    cfg2 = _cli("--env.kwargs", "difficulty=4", "--grpo.eps-high", "0.28", "--env.gamma", "0.1", "--resume")
    assert (cfg.optim.lr, cfg.algo, cfg.optim.warmup_ratio, cfg.model.name) == (1e-4, "coop", 0.2, "tiny")
    assert cfg2.env.kwargs["difficulty"] == 4 and cfg2.grpo.eps_high == 0.28
    assert cfg2.env.gamma == 0.1 and cfg2.resume is True
    cfg3 = _cli(
        "--n", "3", "--lr", "3e-4", "--env", "agon/math-v0", "--no-progress", "--temperatures", "agent_b=1.3"
    )
    assert (cfg3.grpo.num_generations, cfg3.optim.lr, cfg3.env.id, cfg3.progress) == (
        3,
        3e-4,
        "agon/math-v0",
        False,
    )
    assert cfg3.temperatures == {"agent_b": 1.3}
    stop = _cli("--sampling.stop", "</answer>", "\n\n", "--sampling.max-batch-tokens", "None").sampling
    assert stop.stop == ("</answer>", "\n\n") and stop.max_batch_tokens is None


def test_changing_env_id_drops_the_presets_task_kwargs():
    paper = "paper-qwen3-0.6b-deepmath"
    assert _cli("--config", paper, "--env.id", "agon/arith-v0").env.kwargs == {}
    assert _cli("--config", paper, "--env", "agon/arith-v0", "--env.kwargs", "difficulty=3").env.kwargs == {
        "difficulty": 3
    }
    assert _cli("--config", paper, "--steps", "3").env.kwargs["min_difficulty"] == 8
    # KEY=VALUE pairs update the preset's: a local file keeps the paper's filters
    local = _cli("--config", paper, "--env.kwargs", "path=/data/deepmath.parquet").env.kwargs
    assert local == {"min_difficulty": 8, "drop_binary": True, "path": "/data/deepmath.parquet"}
    thinking_off = _cli("--config", paper, "--model.chat-template-kwargs", "enable_thinking=false")
    assert thinking_off.model.chat_template_kwargs == {"enable_thinking": False}
    assert load_config(paper, {"env.id": "agon/arith-v0"}).env.kwargs == {}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--optim.lrr", "1"], "Perhaps you meant"),
        (["--lora-r", "8"], "--model.lora-r"),  # a removed short name points to its dotted key
        (["--steps", "abc"], "invalid literal for int()"),
        (["--env.kwargs", "difficulty"], "KEY=VALUE"),
    ],
)
def test_bad_flags_are_explained(argv, needle, capsys):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_help_shows_defaults_and_docstrings(capsys):
    assert main(["--config", "paper-qwen3-0.6b-deepmath", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--optim.lr FLOAT" in out and "AdamW learning rate" in out and "(default: 5e-05)" in out
    assert "--config NAME_OR_PATH" in out and "--print-config" in out


def test_nested_and_dotted_updates_agree():
    a = load_config(None, {"optim": {"lr": 3e-4}, "temperatures": {"agent_b": 1.3}})
    b = load_config(None, {"optim.lr": "3e-4", "temperatures.agent_b": 1.3})
    assert to_dict(a) == to_dict(b)
    assert to_dict(from_dict(to_dict(a))) == to_dict(a)


def test_an_adapters_sampling_is_the_runs_with_its_own_temperature():
    cfg = load_config(
        None, {"sampling.temperature": 0.9, "sampling.max_new_tokens": 40, "temperatures.agent_b": 1.3}
    )
    run = resolve(cfg)
    assert run.sampling["agent_b"] == dataclasses.replace(cfg.sampling, temperature=1.3)
    assert run.sampling["agent_a"] == cfg.sampling and run.sampling["agent_a"] is not cfg.sampling
    assert run.sampling["base"] == cfg.sampling  # the untrained base: the run's own
    assert cfg.sampling.temperature == 0.9  # the run's own sampling is left as it was


def test_validation_lists_every_problem_with_a_fix():
    with pytest.raises(ConfigError) as e:
        load_config(None, {"optim.lr": -1, "grpo.num_generations": 1, "algo": "agn", "grpo.eps": 2})
    msg = str(e.value)
    assert "optim.lr = -1.0: the learning rate must be > 0" in msg
    assert "N ≥ 2" in msg and "'agon'" in msg and "grpo.eps = 2.0" in msg
    assert len(msg.splitlines()) == 5  # a heading, then one line per problem


@pytest.mark.parametrize(
    ("updates", "needle"),
    [
        ({"lrr": 1}, "did you mean optim.lr"),
        ({"optim.lrr": 1}, "did you mean optim.lr"),
        ({"steps": "abc"}, "steps: expected int"),
        ({"algo": "grpo", "temperatures": {"agent_b": 1.0}}, "grpo uses adapters ['agent_a']"),
        ({"grpo.aggregation": "mean"}, "grpo.aggregation"),
        ({"optim.schedule": "cosine"}, "choose one of ['constant', 'linear']"),
        ({"model.dtype": "fp8"}, "'bfloat16'"),
        ({"env.kwargs.mode": "solo"}, "the algo decides"),
        ({"grpo.eps_high": 0.1}, "must be ≥ grpo.eps"),
        ({"sampling.top_p": 2}, "sampling: top_p must be in (0, 1]"),
        ({"sampling.top_p": 0.9}, "training needs top_p = 1"),
        ({"sampling.top_k": 50}, "training needs top_k = 0"),
        ({"sampling.min_p": 0.1}, "training needs min_p = 0"),
        ({"sampling.repetition_penalty": 1.2}, "training needs repetition_penalty = 1"),
        ({"sampling.min_tokens": 3}, "training needs min_tokens = 0"),
        ({"grpo.rollout_correction": "tis"}, "'token-truncate'"),
        ({"grpo.rollout_correction_cap": 0.5}, "the cap must be ≥ 1"),
        ({"grpo.onpolicy_max_kl": 0}, "guard off"),
    ],
)
def test_bad_values_are_explained(updates, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, updates)
    assert needle in str(e.value)
    assert "\n" not in str(e.value).partition("\n  - ")[2]  # one line per problem


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError, match=r"paper-qwen3-0\.6b-deepmath"):
        load_config("nope")


def test_run_dir_template():
    cfg = load_config(None, {"algo": "coop", "seed": 3, "out_dir": "runs/{algo}-{seed}"})
    assert str(cfg.run_dir) == "runs/coop-3"


def test_load_run_config_reads_what_agon_train_writes(tmp_path):
    cfg = load_config(None, {"optim.lr": 1e-3, "sampling.stop": ["</a>"], "env.kwargs": {"difficulty": 3}})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    assert load_run_config(tmp_path) == cfg


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (None, "no such file"),
        ("steps: [1\n", "not valid YAML at line"),
        ("- 1\n", "expected a mapping"),
        ("sampling:\n  micro_batch: 8\n", "unknown config key 'sampling.micro_batch'"),
    ],
)
def test_load_run_config_errors_are_one_line(tmp_path, text, needle):
    if text is not None:
        (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_run_config(tmp_path)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_every_leaf_is_a_flag(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for key in leaf_keys():
        assert f"--{key.replace('_', '-')}" in out, key
