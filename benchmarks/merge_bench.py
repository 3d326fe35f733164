"""An adapter's merge into the base weights: :func:`merged_weight` against peft's way.

Every LoRA-wrapped layer of the model merged with one adapter, timed both ways (the median of
``--reps`` merges of all layers into buffers reused from a warm-up, as an engine's store refills
them; ``--fresh`` allocates new buffers each time, as training's engine does per busy spell):
``peft``: ``get_delta_weight`` (``s · B A``, two ``[out, in]`` temporaries) added to the base
(:func:`merged_sum`); ``addmm``: :func:`merged_weight`, one ``addmm`` per layer. Both write the
layout the engine runs (:data:`agon_env.agents.merge.INPUT_MAJOR`). ``same_bits``: whether the two
merges are equal everywhere; ``largest_difference`` otherwise bounds them.

    python benchmarks/merge_bench.py [--model smollm2-135m] [--reps 5] [--fresh] [--threads 1]

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from agon_env.agents import LoraSpec, SharedBase, merge


def merges(
    layers: list, originals: list, name: str, fresh: bool, peft_way: bool, reps: int
) -> tuple[float, list]:
    def once(outs: list) -> list:
        if peft_way:
            return [
                merge.merged_sum(w, m.get_delta_weight(name), out=o)
                for m, w, o in zip(layers, originals, outs, strict=True)
            ]
        return [
            merge.merged_weight(m, name, w, out=o) for m, w, o in zip(layers, originals, outs, strict=True)
        ]

    with torch.no_grad():
        kept = once([None] * len(layers))
        seconds = []
        for _ in range(reps):
            t0 = time.perf_counter()
            kept = once([None] * len(layers) if fresh else kept)
            seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds), kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fresh", action="store_true", help="new buffers every merge")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = SharedBase.from_source(args.model)
    base.add_adapter("agent_a", LoraSpec(init_b_std=0.01))
    from peft.tuners.lora import LoraLayer

    layers = [m for m in base._peft.modules() if isinstance(m, LoraLayer) and "agent_a" in m.lora_A]
    originals = [m.base_layer.weight.data for m in layers]
    s_peft, by_peft = merges(layers, originals, "agent_a", args.fresh, True, args.reps)
    s_addmm, by_addmm = merges(layers, originals, "agent_a", args.fresh, False, args.reps)
    print(
        json.dumps(
            {
                "bench": "merge",
                "model": args.model,
                "layers": len(layers),
                "merged_mb": round(sum(w.numel() * w.element_size() for w in originals) / 2**20, 1),
                "threads": args.threads,
                "fresh_buffers": args.fresh,
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                "peft_ms": float(f"{s_peft * 1000:.4g}"),
                "addmm_ms": float(f"{s_addmm * 1000:.4g}"),
                "peft_over_addmm": round(s_peft / s_addmm, 2),
                "same_bits": all(torch.equal(x, y) for x, y in zip(by_peft, by_addmm, strict=True)),
                "largest_difference": max(
                    (x - y).abs().max().item() for x, y in zip(by_peft, by_addmm, strict=True)
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
