from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agon_env.agents.models import (
    ALIASES,
    ModelSourceError,
    cache_dir,
    check_source,
    load_base,
    resolve_source,
)
from agon_env.agents.tiny import build_tiny


def test_tiny_needs_no_files_and_is_seeded(tmp_path, monkeypatch):
    monkeypatch.setenv("AGON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    m1, _tok = load_base("tiny")
    m2, _ = load_base("tiny")
    m3, _ = load_base("tiny", seed=1)
    assert list(tmp_path.iterdir()) == []
    assert all(torch.equal(a, b) for a, b in zip(m1.parameters(), m2.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(m1.parameters(), m3.parameters(), strict=True))
    assert 50_000 < sum(p.numel() for p in m1.parameters()) < 1_000_000
    assert not m1.training and next(m1.parameters()).dtype == torch.float32


def test_tiny_tokenizer_roundtrips_any_text_and_has_chat_template():
    _, tok = build_tiny()
    text = "What is 17 + 25? ∑ π 日本 🙂 \\frac{1}{2} <summary>x</summary>"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id is not None
    assert tok.pad_token_id != tok.eos_token_id
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    # Specials encode as single tokens (the chat template relies on it).
    assert tok("<|im_end|>", add_special_tokens=False)["input_ids"] == [tok.eos_token_id]


@pytest.mark.parametrize("bad", ["smollm", "qwen3", "./no/such/folder", "/no/such/abs", "a/b/c"])
def test_unknown_source_is_one_line_listing_aliases(bad):
    with pytest.raises(ModelSourceError) as e:
        resolve_source(bad)
    msg = str(e.value)
    assert "\n" not in msg and bad in msg
    for alias in ALIASES:
        assert alias in msg


@pytest.mark.parametrize("bad", ["smollm", "./no/such/folder", "a/b/c"])
def test_a_source_is_checked_as_resolve_source_would_refuse_it_but_nothing_is_built(
    bad, tmp_path, monkeypatch
):
    monkeypatch.setenv("AGON_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ModelSourceError) as e:
        check_source(bad)
    assert str(e.value) == _refusal(bad)
    for good in ("tiny", "tiny-qwen3", "qwen3-0.6b", "Qwen/Qwen3-0.6B"):
        check_source(good)
    assert not (tmp_path / "cache").exists()  # tiny-qwen3 is built when loaded, not when checked


def _refusal(source: str) -> str:
    with pytest.raises(ModelSourceError) as e:
        resolve_source(source)
    return str(e.value)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ModelSourceError, match=r"no config\.json"):
        load_base(str(tmp_path))


def test_local_folder_loads(tmp_path):
    model, tok = build_tiny(seed=3)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, ltok = load_base(str(tmp_path))
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), loaded.parameters(), strict=True))
    assert ltok.padding_side == "left" and ltok.chat_template


def test_hub_alias_maps_to_the_paper_base():
    assert resolve_source("qwen3-0.6b") == "Qwen/Qwen3-0.6B"
    assert resolve_source("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AGON_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"


@pytest.mark.model
def test_smollm2_cached_folder_is_plain_hf_and_vllm_loadable(smol_base_factory):
    base = smol_base_factory()
    folder = resolve_source("smollm2-135m")
    cfg = json.loads((Path(folder) / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in cfg
    assert base.tokenizer.eos_token == "<|im_end|>"
    assert sum(p.numel() for p in base.base_model.parameters()) > 100_000_000
