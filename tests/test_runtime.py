"""agon_env.runtime: a resolved run loaded on this machine, one way for every command."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "serving"))
from serving_run import write_tiny_run

from agon_env.config import ModelConfig, TrainConfig
from agon_env.options import SamplingParams
from agon_env.resolved import settle
from agon_env.run_folder import RunFolderError
from agon_env.runtime import (
    BackendError,
    RunOnDisk,
    adapter_folders,
    adapter_sources,
    kv_bytes_per_token,
    pick_backend,
    vllm_options,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_run(tmp_path_factory.mktemp("runs") / "tiny-run")


def test_a_run_stopped_early_is_read_from_its_checkpoint_through_the_checked_reader(run, tmp_path):
    from safetensors.torch import load_file

    early = tmp_path / "early"
    shutil.copytree(run, early)
    state = {
        name: load_file(folder / "adapter_model.safetensors") for name, folder in adapter_folders(run).items()
    }
    shutil.rmtree(early / "adapters")
    torch.save({"step": 3, "adapters": state}, early / "checkpoint.pt")
    sources = adapter_sources(early)
    assert sorted(sources) == ["agent_a", "agent_b"] and isinstance(sources["agent_a"], dict)
    # A checkpoint without adapters was read with weights_only=False and gave nothing to load,
    # silently: now it is refused in one line naming the file.
    torch.save({"step": 3}, early / "checkpoint.pt")
    with pytest.raises(RunFolderError, match=r"checkpoint\.pt holds no agon train checkpoint"):
        adapter_sources(early)


def test_a_cut_off_save_is_no_adapter_anywhere(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    shutil.copytree(copy / "adapters" / "agent_a", copy / "adapters" / ".agent_a.old")
    disk = RunOnDisk.read(copy)
    assert list(adapter_folders(copy)) == disk.adapter_names == ["agent_a", "agent_b"]
    assert disk.name == "copy" and disk.eval_dir == copy / "eval"


def test_vllm_limits_come_from_the_run_and_on_cpu_the_kv_cache_fits_the_batch():
    from agon_env.agents.adapters import SharedBase

    base = SharedBase.from_source("tiny")
    cfg = TrainConfig(
        model=ModelConfig(name="tiny", max_seq_len=64, gpu_memory_utilization=0.25),
        sampling=SamplingParams(max_batch_size=5),
    )
    run = settle(cfg)
    cpu = vllm_options(run, base, "cpu")
    window = base.base_model.config.max_position_embeddings
    assert cpu["max_model_len"] == min(64, window) and cpu["gpu_memory_utilization"] == 0.25
    c = base.base_model.config
    per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * 4
    assert kv_bytes_per_token(base, "float32") == per_token
    assert cpu["kv_cache_memory_bytes"] == per_token * cpu["max_model_len"] * 5
    assert "kv_cache_memory_bytes" not in vllm_options(run, base, "cuda")  # a GPU's share is its own


def test_one_backend_table_refuses_an_unknown_name():
    assert pick_backend("hf", "tiny") == "hf" and pick_backend("auto", "tiny") == "hf"
    with pytest.raises(BackendError, match="unknown backend 'trt'"):
        pick_backend("trt", "tiny")
