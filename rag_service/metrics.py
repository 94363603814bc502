"""Prometheus metrics, one registry per app (no process-global collectors, so apps and tests don't
share counters).

Several worker processes (`rag-serve --workers N`) use prometheus-client's multiprocess mode: with
`PROMETHEUS_MULTIPROC_DIR` set (rag-serve sets it for N > 1) every process writes its values to files in
that folder and `/metrics`, whichever worker answers it, reports the sum over all of them (gauges: over
the live processes). One port per worker would need a scrape target per worker, which a supervisor that
hands out one shared socket cannot give; one folder keeps one target.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess as prom_multiprocess

STAGES = ("memory", "rewrite", "embed", "retrieve", "prompt", "generate", "store", "compress")
PROMPT_PARTS = ("system_tokens", "summary_tokens", "history_tokens", "query_tokens", "context_tokens")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_TOKEN_BUCKETS = (0, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_M = TypeVar("_M", Counter, Histogram)


def multiprocess_dir() -> str | None:
    """The multiprocess folder, when this process is one of several writing metrics."""
    return os.environ.get(MULTIPROC_ENV) or None


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.multiprocess = multiprocess_dir() is not None
        self._backlog: Callable[[], float] | None = None
        # Labelled children by (metric, label values): `labels()` checks and converts its arguments and takes
        # the metric's lock on every call (2-6 µs, ~15 calls a turn); the child it returns is the same object.
        self._children: dict[tuple[Any, ...], Any] = {}
        r = self.registry
        self.stage_seconds = Histogram(
            "rag_stage_seconds", "Time spent per pipeline stage", ["stage"], registry=r, buckets=_LATENCY_BUCKETS
        )
        self.turn_seconds = Histogram(
            "rag_turn_seconds", "Whole turn time, generation included", ["mode"], registry=r, buckets=_LATENCY_BUCKETS
        )
        self.prompt_tokens = Histogram(
            "rag_prompt_tokens", "Tokens per prompt part", ["part"], registry=r, buckets=_TOKEN_BUCKETS
        )
        self.turns = Counter("rag_turns_total", "Chat turns answered", ["mode", "streamed"], registry=r)
        self.rewrites = Counter("rag_rewrite_total", "Rewriter outcomes", ["action"], registry=r)
        self.compressions = Counter("rag_compressions_total", "Summaries made", ["outcome"], registry=r)
        self.tokens_saved = Counter("rag_compression_tokens_saved_total", "Verbatim tokens replaced", registry=r)
        self.upstream_errors = Counter("rag_upstream_errors_total", "LLM upstream failures", ["stage"], registry=r)
        self.cost = Counter("rag_cost_estimate_total", "Estimated LLM cost, in the price table's currency", registry=r)
        self.faq = Counter("rag_faq_short_path_total", "FAQ short-path look-ups", ["outcome"], registry=r)
        # Rating events (a changed rating counts again); the archive's report has the current ratings.
        self.feedback = Counter(
            "rag_feedback_total", "Answer ratings given", ["rating", "mode", "turn_kind"], registry=r
        )
        self.filtered = Counter("rag_output_filtered_total", "Answers that leaked the system prompt", registry=r)
        # Sessions with changes not yet in the archive, summed over the live worker processes.
        self.archive_backlog = Gauge(
            "rag_archive_backlog_sessions",
            "Sessions with changes not yet written to the archive",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.archive_conflicts = Counter(
            "rag_archive_conflicts_total",
            "Sessions whose live copy numbered messages differently from the archive (merged, none dropped)",
            registry=r,
        )

    def track_backlog(self, pending: Callable[[], float]) -> None:
        """The archive backlog gauge follows `pending`. A callback gauge exists only in the process that
        renders, so with several processes each one writes its value at every turn and every scrape."""
        self._backlog = pending
        if not self.multiprocess:
            self.archive_backlog.set_function(pending)

    def _write_backlog(self) -> None:
        if self.multiprocess and self._backlog is not None:
            self.archive_backlog.set(self._backlog())

    def child(self, metric: _M, *values: str) -> _M:
        """`metric.labels(*values)`, remembered."""
        key = (metric, *values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def observe_turn(
        self, mode: str, streamed: bool, timings: Mapping[str, float], receipt: Mapping[str, object], cost: float
    ) -> None:
        for stage, seconds in timings.items():
            self.child(self.stage_seconds, stage).observe(seconds)
        for part in PROMPT_PARTS:
            value = receipt.get(part)
            if isinstance(value, int):
                self.child(self.prompt_tokens, part).observe(value)
        self.child(self.turns, mode, str(streamed).lower()).inc()
        self.child(self.rewrites, str(receipt.get("rewrite", "none"))).inc()
        if cost:
            self.cost.inc(cost)
        self._write_backlog()

    def render(self) -> bytes:
        if not self.multiprocess:
            return generate_latest(self.registry)
        self._write_backlog()
        merged = CollectorRegistry()
        prom_multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return generate_latest(merged)

    def close(self) -> None:
        """This process stops: its live gauges leave the sums (its counters stay, as Prometheus expects)."""
        directory = multiprocess_dir()
        if self.multiprocess and directory:
            prom_multiprocess.mark_process_dead(os.getpid(), directory)  # type: ignore[no-untyped-call]
