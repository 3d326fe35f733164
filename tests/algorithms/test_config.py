"""Config: defaults, presets, command-line overrides and up-front validation."""

from __future__ import annotations

import argparse

import pytest

from agon_env.algorithms.cli_train import add_train_parser, config_from_args
from agon_env.algorithms.config import (
    ConfigError,
    TrainConfig,
    field_docs,
    from_dict,
    leaf_fields,
    load_config,
    preset_names,
    to_dict,
)


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", *argv])


def test_every_field_has_a_docstring():
    for key, (_tp, doc) in leaf_fields().items():
        assert doc, f"{key} has no docstring"
    assert field_docs(TrainConfig)["steps"].startswith("Training steps")


def test_embedded_default_is_the_offline_cpu_recipe():
    cfg = load_config()
    assert (cfg.model.name, cfg.env.id, cfg.model.device) == ("smollm2-135m", "agon/arith-v0", "cpu")
    assert cfg.algo == "agon"


def test_paper_preset():
    assert "paper-qwen3-0.6b-deepmath" in preset_names()
    cfg = load_config("paper-qwen3-0.6b-deepmath")
    assert cfg.model.name == "Qwen/Qwen3-0.6B" and cfg.model.backend == "vllm"
    assert (cfg.model.lora_r, cfg.model.lora_alpha) == (16, 32)
    assert cfg.env.id == "agon/deepmath-v0" and cfg.env.kwargs["min_difficulty"] == 8
    assert cfg.env.kwargs["drop_binary"] is True
    assert (cfg.optim.lr, cfg.optim.schedule, cfg.optim.warmup_ratio) == (5e-5, "linear", 0.1)
    assert (cfg.grpo.num_generations, cfg.algo, cfg.env.lam) == (8, "agon", 0.5)


def test_command_line_overrides():
    args = _parse("--lr", "1e-4", "--algo", "coop", "--optim.warmup-ratio", "0.2", "--model", "tiny")
    args2 = _parse("--difficulty", "4", "--set", "grpo.eps_high=0.28", "--gamma", "0.1", "--resume")
    cfg, cfg2 = config_from_args(args), config_from_args(args2)
    assert (cfg.optim.lr, cfg.algo, cfg.optim.warmup_ratio, cfg.model.name) == (1e-4, "coop", 0.2, "tiny")
    assert cfg2.env.kwargs["difficulty"] == 4 and cfg2.grpo.eps_high == 0.28
    assert cfg2.env.gamma == 0.1 and cfg2.resume is True


def test_nested_and_dotted_updates_agree():
    a = load_config(None, {"optim": {"lr": 3e-4}, "sampling": {"temperatures": {"agent_b": 1.3}}})
    b = load_config(None, {"optim.lr": "3e-4", "sampling.temperatures.agent_b": "1.3"})
    assert to_dict(a) == to_dict(b)
    assert to_dict(from_dict(to_dict(a))) == to_dict(a)


def test_validation_lists_every_problem_with_a_fix():
    with pytest.raises(ConfigError) as e:
        load_config(None, {"lr": -1, "grpo.num_generations": 1, "algo": "agn", "eps": 2})
    msg = str(e.value)
    assert "optim.lr = -1.0: the learning rate must be > 0" in msg
    assert "N ≥ 2" in msg and "'agon'" in msg and "grpo.eps = 2.0" in msg


@pytest.mark.parametrize(
    ("updates", "needle"),
    [
        ({"lrr": 1}, "did you mean lr"),
        ({"steps": "abc"}, "steps: expected int"),
        ({"algo": "grpo", "temperatures": {"agent_b": 1.0}}, "grpo uses adapters ['agent_a']"),
        ({"aggregation": "mean"}, "grpo.aggregation"),
        ({"env.kwargs.mode": "solo"}, "the algo decides those"),
        ({"eps_high": 0.1}, "must be ≥ grpo.eps"),
    ],
)
def test_bad_values_are_explained(updates, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, updates)
    assert needle in str(e.value)


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError, match=r"paper-qwen3-0\.6b-deepmath"):
        load_config("nope")


def test_run_dir_template():
    cfg = load_config(None, {"algo": "coop", "seed": 3, "out_dir": "runs/{algo}-{seed}"})
    assert str(cfg.run_dir) == "runs/coop-3"
