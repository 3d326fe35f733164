"""The vLLM checks, run as a script: vLLM spawns workers, so the engine must be built
under ``if __name__ == "__main__"`` and outside pytest's process. Writes one JSON object
to ``--out`` (vLLM's own logs go to stdout, so stdout is not parseable) and prints it.

    python tests/agents/vllm_scenario.py --out result.json [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from agon_env.agents import HFBackend, LoraSpec, SamplingParams, SharedBase, render_prompt
from agon_env.agents.vllm_backend import VLLMBackend

PROBLEMS = ["What is 2 + 5?", "What is 4 * 3?", "What is 9 - 6?", "What is 7 + 8?"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    base = SharedBase.from_source("smollm2-135m")
    # Large B-init so the two adapters visibly disagree under greedy decoding.
    base.add_adapter("agent_a", LoraSpec(init_seed=1, init_b_std=0.02))
    base.add_adapter("agent_b", LoraSpec(init_seed=2, init_b_std=0.02))
    prompts = [render_prompt({"problem": p, "draft": "", "role": 0}, base.tokenizer) for p in PROBLEMS]
    greedy = SamplingParams(max_new_tokens=40, temperature=0, stop=("</answer>",))

    t0 = time.time()
    vb = VLLMBackend(base, workdir=args.workdir, max_model_len=1024)
    start_s = time.time() - t0
    hf = HFBackend(base)
    mixed_names = ["agent_a"] * 4 + ["agent_b"] * 4
    v_mixed = vb.generate(prompts * 2, greedy, adapter=mixed_names)
    h_a = hf.generate(prompts, greedy, adapter="agent_a")
    h_b = hf.generate(prompts, greedy, adapter="agent_b")
    v_base = vb.generate(prompts, greedy, adapter="__base__")
    h_base = hf.generate(prompts, greedy, adapter="__base__")

    def differ(xs, ys):
        return [x.completion_ids != y.completion_ids for x, y in zip(xs, ys, strict=True)]

    def agree(xs, ys):
        return [x.completion_ids == y.completion_ids for x, y in zip(xs, ys, strict=True)]

    def lp_err(xs, ys):
        errs = [
            abs(a - b)
            for x, y in zip(xs, ys, strict=True)
            if x.completion_ids == y.completion_ids
            for a, b in zip(x.logprobs, y.logprobs, strict=True)
        ]
        return max(errs, default=0.0)

    # Sync: agent_a takes agent_b's weights; after the sync its generations must follow.
    before_a = vb.generate(prompts, greedy, adapter="agent_a")
    old_id = vb.requests["agent_a"].lora_int_id
    base.load_adapter_state_dict("agent_a", base.adapter_state_dict("agent_b"))
    vb.sync("agent_a")
    after_a = vb.generate(prompts, greedy, adapter="agent_a")
    after_b = vb.generate(prompts, greedy, adapter="agent_b")

    sampled = SamplingParams(max_new_tokens=16, temperature=1.0, seed=3, stop=())
    s1 = vb.generate(prompts, sampled, adapter="agent_b")
    s2 = vb.generate(prompts, sampled, adapter="agent_b")
    result = json.dumps(
        {
            "engine_start_s": round(start_s, 1),
            "mixed_a_vs_hf": agree(v_mixed[:4], h_a),
            "mixed_b_vs_hf": agree(v_mixed[4:], h_b),
            "base_vs_hf": agree(v_base, h_base),
            "a_differs_from_b": differ(h_a, h_b),
            "logprob_max_abs_err": lp_err(v_mixed, h_a + h_b),
            "sync_new_id": vb.requests["agent_a"].lora_int_id != old_id,
            "sync_changed": differ(before_a, after_a),
            "sync_follows_b": agree(after_a, after_b),
            "seeded_repeat": agree(s1, s2),
            "finish": [c.finish_reason for c in v_mixed],
            "texts": [c.text for c in v_mixed[:2]],
            "lengths_match": all(len(c.completion_ids) == len(c.logprobs) for c in v_mixed + s1),
            "finish_matches_hf": [
                x.finish_reason == y.finish_reason for x, y in zip(v_mixed, h_a + h_b, strict=True)
            ],
        }
    )
    if args.out:
        Path(args.out).write_text(result)
    print(result)
    vb.close()


if __name__ == "__main__":
    main()
