"""The output head alone: ``F.linear`` against the oneDNN-packed copy the engine runs it from.

For each row count, the head's product over that many rows of hidden states, timed both ways
(the median of ``--reps`` calls after a warm-up), with the largest difference between their logits
and whether a row's packed logits are the same bits at every row count (``rows_alike``). The
head is the model's own (``get_output_embeddings``), packed as :class:`PackedHead` packs it
(:data:`agon_env.agents.packed_head.PACK_ROWS`).

    python benchmarks/packed_head_bench.py [--model smollm2-135m] [--rows 1 8 15 32] [--threads 1]

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from agon_env.agents import SharedBase, packed_head


def timed(fn, reps: int) -> float:
    fn()
    seconds = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8, 15, 32])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    head = SharedBase.from_source(args.model).base_model.get_output_embeddings()
    if not packed_head.packable(head):
        raise SystemExit(f"this head cannot be packed here: {head}")
    packed = packed_head.pack(head.weight)
    torch.manual_seed(0)
    x = torch.randn(max(args.rows), head.in_features)
    results, first = {}, []
    with torch.inference_mode():
        for n in args.rows:
            rows = x[:n]
            plain = torch.nn.functional.linear(rows, head.weight, head.bias)
            fast = packed_head.product(rows, packed, head.bias)
            first.append(fast[0])
            ms_linear = timed(
                lambda rows=rows: torch.nn.functional.linear(rows, head.weight, head.bias), args.reps
            )
            ms_packed = timed(lambda rows=rows: packed_head.product(rows, packed, head.bias), args.reps)
            results[str(n)] = {
                "linear_ms": round(ms_linear, 2),
                "packed_ms": round(ms_packed, 2),
                "linear_over_packed": round(ms_linear / ms_packed, 2),
                "largest_logit_difference": float(f"{(fast - plain).abs().max().item():.2e}"),
            }
    print(
        json.dumps(
            {
                "bench": "packed_head",
                "model": args.model,
                "head": list(head.weight.shape),
                "threads": args.threads,
                "pack_rows": packed_head.PACK_ROWS,
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                "rows": results,
                "rows_alike": all(torch.equal(f, first[0]) for f in first),
            }
        )
    )


if __name__ == "__main__":
    main()
