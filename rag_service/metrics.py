"""Prometheus metrics, one registry per app (no process-global collectors, so apps and tests don't
share counters)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

STAGES = ("memory", "rewrite", "embed", "retrieve", "prompt", "generate", "store", "compress")
PROMPT_PARTS = ("system_tokens", "summary_tokens", "history_tokens", "query_tokens", "context_tokens")
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_TOKEN_BUCKETS = (0, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
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
        # Set to a callback by the app factory: sessions with changes not yet in the archive.
        self.archive_backlog = Gauge(
            "rag_archive_backlog_sessions", "Sessions with changes not yet written to the archive", registry=r
        )
        self.archive_conflicts = Counter(
            "rag_archive_conflicts_total",
            "Sessions whose live copy numbered messages differently from the archive (merged, none dropped)",
            registry=r,
        )

    def observe_turn(
        self, mode: str, streamed: bool, timings: Mapping[str, float], receipt: Mapping[str, object], cost: float
    ) -> None:
        for stage, seconds in timings.items():
            self.stage_seconds.labels(stage).observe(seconds)
        for part in PROMPT_PARTS:
            value = receipt.get(part)
            if isinstance(value, int):
                self.prompt_tokens.labels(part).observe(value)
        self.turns.labels(mode, str(streamed).lower()).inc()
        self.rewrites.labels(str(receipt.get("rewrite", "none"))).inc()
        if cost:
            self.cost.inc(cost)

    def render(self) -> bytes:
        return generate_latest(self.registry)
