"""``GET /metrics``: the server's counters in Prometheus's text format (version 0.0.4).

A few lines of our own rather than ``prometheus_client`` (not a dependency): counters of requests by
model and status and of tokens by kind, a histogram of request latency, and the queue depth as a
gauge. Names follow Prometheus's conventions (``agon_`` prefix, ``_total`` counters, ``_seconds``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Upper bounds (seconds) of the latency histogram: a tiny model's tens of ms to a loaded CPU's minutes."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    """A label value as the text format writes it: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}" if labels else ""


class Metrics:
    """What ``/metrics`` reports; updated from the event loop and read by the scrape (one lock)."""

    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self.queue_depth = queue_depth
        self._lock = threading.Lock()
        self.requests: dict[tuple[tuple[str, str], ...], int] = {}
        self.tokens: dict[str, int] = {"prompt": 0, "completion": 0}
        self.buckets = [0] * len(LATENCY_BUCKETS)
        self.latency_sum, self.latency_count = 0.0, 0

    def request(self, model: str, status: int, seconds: float) -> None:
        """One finished request (any status; an error is a status >= 400)."""
        key = (("model", model), ("status", str(status)))
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1
            self.latency_sum += seconds
            self.latency_count += 1
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1

    def add_tokens(self, prompt: int, completion: int) -> None:
        with self._lock:
            self.tokens["prompt"] += prompt
            self.tokens["completion"] += completion

    def render(self) -> str:
        with self._lock:
            errors = sum(v for k, v in self.requests.items() if int(dict(k)["status"]) >= 400)
            lines = [
                "# HELP agon_requests_total Chat completion requests, by model and HTTP status.",
                "# TYPE agon_requests_total counter",
                *(f"agon_requests_total{_labels(k)} {v}" for k, v in sorted(self.requests.items())),
                "# HELP agon_request_errors_total Requests answered with a status of 400 or more.",
                "# TYPE agon_request_errors_total counter",
                f"agon_request_errors_total {errors}",
                "# HELP agon_tokens_total Tokens of the prompts read and completions written, every stage.",
                "# TYPE agon_tokens_total counter",
                *(f'agon_tokens_total{{kind="{k}"}} {v}' for k, v in self.tokens.items()),
                "# HELP agon_request_seconds Request latency, arrival to last byte.",
                "# TYPE agon_request_seconds histogram",
                *(
                    f'agon_request_seconds_bucket{{le="{b:g}"}} {n}'
                    for b, n in zip(LATENCY_BUCKETS, self.buckets, strict=True)
                ),
                f'agon_request_seconds_bucket{{le="+Inf"}} {self.latency_count}',
                f"agon_request_seconds_sum {self.latency_sum:.6f}",
                f"agon_request_seconds_count {self.latency_count}",
            ]
        lines += [
            "# HELP agon_queue_depth Requests waiting for a batch or being generated.",
            "# TYPE agon_queue_depth gauge",
            f"agon_queue_depth {self.queue_depth()}",
        ]
        return "\n".join(lines) + "\n"
