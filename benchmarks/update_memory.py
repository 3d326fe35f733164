"""Update memory per token of the paper's base shape, measured on CPU, for docs/scaling.md.

Qwen3-0.6B's exact widths (hidden 1024, 16 query / 8 KV heads of 128, MLP 3072, vocabulary
151,936, tied embeddings) with random weights and only ``--layers`` of its 28 layers, one
LoRA r16 adapter on every linear layer. One update micro-batch -- ``completion_logprobs``
and ``backward`` over one sequence of 256 prompt + T completion tokens -- with the bytes
autograd *keeps for the backward pass* counted exactly (``saved_tensors_hooks``, one count
per storage), with and without gradient checkpointing. Kept bytes are what grows with
tokens and layers; with checkpointing, one layer's un-checkpointed activations are
rebuilt at a time in the backward pass, so the peak is about
``tokens × (kept/token/layer × layers + one layer without checkpointing)``. Exact counts, so
no RSS noise; fp32 here (a bf16 run keeps half).

    python benchmarks/update_memory.py [--layers 1 2] [--tokens 1024]

Last line: one JSON object with every count and the bytes per token per layer.
"""

from __future__ import annotations

import argparse
import json
import sys


def kept_bytes(layers: int, tokens: int, checkpointing: bool) -> int:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from agon_env.agents import LoraSpec, SharedBase
    from agon_env.agents.tiny import build_tiny_tokenizer
    from agon_env.algorithms.logprobs import completion_logprobs

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=layers,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
        max_position_embeddings=40960,
    )  # fmt: skip
    base = SharedBase(Qwen3ForCausalLM(config).float().eval(), build_tiny_tokenizer())
    base.add_adapter("agent_a", LoraSpec(init_seed=1))
    if checkpointing:
        base.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    params = {p.untyped_storage().data_ptr() for p in base.model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:  # weights are not activations
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    prompt = torch.randint(0, 151936, (256,)).tolist()
    completion = torch.randint(0, 151936, (tokens,)).tolist()
    with base.use("agent_a"):
        base.model.train()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            lp = completion_logprobs(base.model, [prompt], [completion])
        lp.sum().backward()
    return sum(seen.values())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, nargs=2, default=[1, 2])
    p.add_argument("--tokens", type=int, default=1024)
    a = p.parse_args()
    n = 256 + a.tokens
    rows = {}
    for ckpt in (True, False):
        for layers in a.layers:
            rows[f"{'ckpt' if ckpt else 'full'}_{layers}"] = kept_bytes(layers, a.tokens, ckpt)
            print(rows, file=sys.stderr)
    lo, hi = a.layers

    def per_layer(kind: str) -> float:
        return (rows[f"{kind}_{hi}"] - rows[f"{kind}_{lo}"]) / (hi - lo) / n

    result = {
        "tokens": n,
        "kept_bytes": rows,
        "fp32_kept_per_token_per_layer_ckpt": per_layer("ckpt"),
        "fp32_kept_per_token_per_layer_full": per_layer("full"),
        "fp32_kept_per_token_fixed_ckpt": rows[f"ckpt_{lo}"] / n - lo * per_layer("ckpt"),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
