"""``GET /metrics``: the server's counters in Prometheus's text format (version 0.0.4), named as vLLM's.

A few lines of our own rather than ``prometheus_client`` (not a dependency). Where vLLM's server has
a metric of the same meaning, it has vLLM's name, label (``model_name``), help text and buckets
(``vllm/v1/metrics/loggers.py`` and ``buckets.py``) under the prefix ``agon:`` instead of ``vllm:``,
so a vLLM dashboard reads it by changing the prefix; the prefix is our own because with
``--engine vllm`` vLLM's engine registers its own ``vllm:`` series in this process, which measure its
engine requests (a cascade is two), not the server's.

======================================  =========  ========================================================
metric                                  type       meaning
======================================  =========  ========================================================
``agon:requests_total``                 counter    every HTTP request but ``/metrics`` and ``/health``
                                                   (which vLLM's ``http_requests_total`` leaves out too),
                                                   by ``model_name`` and the ``status`` the client saw
``agon:num_requests_running``           gauge      requests in a generate call now
``agon:num_requests_waiting``           gauge      requests admitted and waiting for their call
``agon:prompt_tokens_total``            counter    prompt tokens read, every stage of every answer
``agon:generation_tokens_total``        counter    tokens generated, every stage (a cascade's draft too)
``agon:time_to_first_token_seconds``    histogram  arrival to the first piece generated (streamed requests)
``agon:inter_token_latency_seconds``    histogram  between consecutive pieces of a streamed request
``agon:e2e_request_latency_seconds``    histogram  arrival to the last byte of an answered request
``agon:request_queue_time_seconds``     histogram  admission to the start of the request's generate call
======================================  =========  ========================================================

The status is the one the client saw: a 503 of a streamed request is a 503 (refused before its
first byte), a failure after the first byte counts under its error event's status, and a streamed
request whose client left before its first byte under 499.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

PREFIX = "agon:"
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
REQUEST_LATENCY_BUCKETS += (120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
"""vLLM's ``request_latency`` buckets (e2e and queue time)."""
TIME_TO_FIRST_TOKEN_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
TIME_TO_FIRST_TOKEN_BUCKETS += (2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
"""vLLM's ``time_to_first_token`` buckets."""
INTER_TOKEN_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
INTER_TOKEN_LATENCY_BUCKETS += (2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
"""vLLM's ``inter_token_latency`` buckets."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]

HISTOGRAMS = {
    "time_to_first_token_seconds": (
        "Histogram of time to first token in seconds.",
        TIME_TO_FIRST_TOKEN_BUCKETS,
    ),
    "inter_token_latency_seconds": (
        "Histogram of inter-token latency in seconds.",
        INTER_TOKEN_LATENCY_BUCKETS,
    ),
    "e2e_request_latency_seconds": ("Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS),
    "request_queue_time_seconds": (
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
}
"""Name (after the prefix) -> vLLM's help text and buckets."""
COUNTERS = {
    "requests_total": "HTTP requests by model and the status the client saw.",
    "prompt_tokens_total": "Number of prefill tokens processed.",
    "generation_tokens_total": "Number of generation tokens processed.",
}
GAUGES = {
    "num_requests_running": "Number of requests in model execution batches.",
    "num_requests_waiting": "Number of requests waiting to be processed.",
}


def _escape(value: str) -> str:
    """A label value as the text format writes it: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}" if labels else ""


class Histogram:
    """Cumulative buckets, sum and count of one labelled series."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds, self.counts, self.sum, self.count = tuple(bounds), [0] * len(bounds), 0.0, 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1

    def lines(self, name: str, labels: Labels) -> list[str]:
        les = [*(f"{b:g}" for b in self.bounds), "+Inf"]
        counts = [*self.counts, self.count]
        return [
            *(
                f"{name}_bucket{_labels((*labels, ('le', le)))} {n}"
                for le, n in zip(les, counts, strict=True)
            ),
            f"{name}_sum{_labels(labels)} {self.sum:.6f}",
            f"{name}_count{_labels(labels)} {self.count}",
        ]


class Metrics:
    """What ``/metrics`` reports; updated from the event loop and read by the scrape (one lock).

    ``running`` and ``waiting``: the scheduler's counts, read at each scrape."""

    def __init__(self, running: Callable[[], int], waiting: Callable[[], int]) -> None:
        self.gauges = {"num_requests_running": running, "num_requests_waiting": waiting}
        self._lock = threading.Lock()
        self.counters: dict[str, dict[Labels, float]] = {name: {} for name in COUNTERS}
        self.histograms: dict[str, dict[Labels, Histogram]] = {name: {} for name in HISTOGRAMS}

    def _count(self, name: str, labels: Labels, by: float = 1) -> None:
        with self._lock:
            series = self.counters[name]
            series[labels] = series.get(labels, 0) + by

    def _observe(self, name: str, model: str, value: float) -> None:
        key = (("model_name", model),)
        with self._lock:
            series = self.histograms[name]
            if key not in series:
                series[key] = Histogram(HISTOGRAMS[name][1])
            series[key].observe(value)

    def request(self, model: str, status: int) -> None:
        """One finished HTTP request, under the status its client saw."""
        self._count("requests_total", (("model_name", model), ("status", str(status))))

    def tokens(self, model: str, prompt: int, generation: int) -> None:
        self._count("prompt_tokens_total", (("model_name", model),), prompt)
        self._count("generation_tokens_total", (("model_name", model),), generation)

    def first_token(self, model: str, seconds: float) -> None:
        self._observe("time_to_first_token_seconds", model, seconds)

    def inter_token(self, model: str, seconds: float) -> None:
        self._observe("inter_token_latency_seconds", model, seconds)

    def e2e(self, model: str, seconds: float) -> None:
        self._observe("e2e_request_latency_seconds", model, seconds)

    def queued(self, model: str, seconds: float) -> None:
        self._observe("request_queue_time_seconds", model, seconds)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, text in COUNTERS.items():
                full = PREFIX + name
                lines += [f"# HELP {full} {text}", f"# TYPE {full} counter"]
                lines += [f"{full}{_labels(k)} {v:g}" for k, v in sorted(self.counters[name].items())]
            for name, (text, _) in HISTOGRAMS.items():
                full = PREFIX + name
                lines += [f"# HELP {full} {text}", f"# TYPE {full} histogram"]
                for key, histogram in sorted(self.histograms[name].items()):
                    lines += histogram.lines(full, key)
        for name, text in GAUGES.items():
            full = PREFIX + name
            lines += [f"# HELP {full} {text}", f"# TYPE {full} gauge", f"{full} {self.gauges[name]()}"]
        return "\n".join(lines) + "\n"
