"""The tiny in-process models: no files, no network, seconds to build.

``tiny``
    A seeded random ``LlamaForCausalLM`` (~100K parameters) and a byte-level BPE tokenizer
    trained on a fixed corpus, with a ChatML template: the unit tests' model.
``tiny-qwen3``
    A ``Qwen3ForCausalLM`` of the same size (GQA, q/k norms, head_dim 64 so vLLM's
    attention kernels take it), with ``<think>``/``</think>`` added as Qwen3 adds them and a
    chat template that renders thinking as Qwen3's does. It is taught the thinking output
    format for a few hundred steps (seconds), then saved once into the model cache so the
    HF and vLLM backends load the same files: the paper preset's offline test and
    ``scripts/gpu_check.sh`` run on it, where no real weights can be downloaded.
"""

from __future__ import annotations

from typing import Any

import torch

# ChatML, the format SmolLM2 and Qwen3 were tuned on; also used by the tiny model.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Qwen3's template, reduced to what changes a prompt here: an assistant turn before the
# last user turn keeps only its text after ``</think>``, and ``enable_thinking=False``
# pre-fills an empty thought block so the model answers directly.
QWEN3_THINKING_TEMPLATE = (
    "{% set ns = namespace(last_user=-1) %}"
    "{% for message in messages %}{% if message['role'] == 'user' %}"
    "{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\n') %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}"
)
THINK_TOKENS = ["<think>", "</think>"]
TINY_QWEN3_FOLDER = "tiny-qwen3-v1"
"""Bump the suffix whenever :func:`build_tiny_qwen3` changes: the cached folder is reused."""


_TINY_CORPUS = [
    "What is 17 + 25? Let me add the tens and the ones.",
    "<summary>17 + 25 = 42 because 10 + 20 = 30 and 7 + 5 = 12.</summary>",
    "<answer>42</answer>",
    "The draft says the answer is 12. Check it: 3 * 4 = 12, so the draft is right.",
    "Verify the draft and re-derive the result. Do not trust it.",
    "0 1 2 3 4 5 6 7 8 9 10 + - * / = ( ) . , ? !",
    "You are a careful solver. Reason step by step, then write a summary and an answer.",
]
TINY_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_tokenizer(vocab_size: int = 384, *, thinking: bool = False) -> Any:
    """A byte-level BPE trained on a fixed corpus: deterministic, no files, any text encodes.

    ``thinking`` adds ``<think>``/``</think>`` as whole tokens that decoding keeps (Qwen3
    adds them the same way, not as special tokens) and uses Qwen3's thinking template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=TINY_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = _TINY_CORPUS + ([a for _, a in _format_demos(8)] if thinking else [])
    tk.train_from_iterator(corpus * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tok.chat_template = CHATML_TEMPLATE
    if thinking:
        tok.add_tokens(THINK_TOKENS)
        tok.chat_template = QWEN3_THINKING_TEMPLATE
    tok.padding_side = "left"
    return tok


def _seeded(model_cls: Any, config: Any, tok: Any, seed: int, teach_steps: int = 0) -> tuple[Any, Any]:
    """``model_cls(config)`` initialised (and taught, :func:`_teach_format`) under ``seed``
    without touching the caller's RNG, in fp32 eval mode, generating with ``tok``'s ids."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
        if teach_steps:
            _teach_format(model, tok, teach_steps)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model.float().eval(), tok


def build_tiny(seed: int = 0, hidden: int = 64, layers: int = 2) -> tuple[Any, Any]:
    """A seeded random ``LlamaForCausalLM`` (~100K params) plus its tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        architectures=["LlamaForCausalLM"],
    )
    return _seeded(LlamaForCausalLM, config, tok, seed)


def build_tiny_qwen3(
    seed: int = 0, hidden: int = 64, layers: int = 2, teach_steps: int = 200
) -> tuple[Any, Any]:
    """A seeded ``Qwen3ForCausalLM`` plus the thinking tokenizer (see ``tiny-qwen3``), taught
    the output format for ``teach_steps`` steps (0: purely random weights)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = build_tiny_tokenizer(thinking=True)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,  # vLLM's attention backends take 64, not the 16 of hidden/4
        max_position_embeddings=40960,  # Qwen3's, so the paper preset's 12288-token sequences fit
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        architectures=["Qwen3ForCausalLM"],
    )
    return _seeded(Qwen3ForCausalLM, config, tok, seed, teach_steps)


def _format_demos(n: int) -> list[tuple[str, str]]:
    """``n`` (question, thinking-format answer) pairs: sums and linear functions; the tags never vary."""
    out = []
    for i in range(n):
        a, b, x = 3 + 7 * i % 41, 5 + 11 * i % 37, 2 + i % 13
        if i % 2:
            q, work, value = f"What is {a} + {b}?", f"{a} + {b} = {a + b}", a + b
        else:
            q, work, value = f"Let f(x) = {a}x + {b}. Compute f({x}).", f"f({x}) = {a} * {x} + {b}", a * x + b
        answer = (
            f"<think>\n{work} = {value}.\n</think>\n\n"
            f"<summary>Worked out {work}.</summary>\n<answer>{value}</answer>"
        )
        out.append((q, answer))
    return out


def _teach_format(model: Any, tok: Any, steps: int) -> None:
    """A few hundred next-token steps on chats whose answers use the thinking format, so
    sampled completions sometimes carry the tags: rewards then vary within a group and the
    update, the importance weights and the on-policy guard all run (random weights score 0
    everywhere, every group is dropped, and nothing past the rollout is exercised)."""
    from agon_env.agents.prompt_families import MATH  # the paper preset's family

    systems = (MATH.drafter_system, MATH.challenger_system)
    chats = [
        tok.apply_chat_template(
            [
                {"role": "system", "content": systems[i % 2]},
                {"role": "user", "content": q},
                {"role": "assistant", "content": a},
            ],
            tokenize=False,
        )
        for i, (q, a) in enumerate(_format_demos(64))
    ]
    # Right padding: positions then count from each chat's first token, as in generation.
    batch = tok(chats, return_tensors="pt", padding=True, add_special_tokens=False, padding_side="right")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        model(**batch, labels=labels).loss.backward()
        opt.step()
    model.eval()
