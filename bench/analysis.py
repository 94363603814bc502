"""What one runner's run measured: its turns matched with the upstream's server-side records (overhead,
calls, prompt tokens, whether the order number survived), and the per-run numbers the report aggregates.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_service.testing.fake_llm import message_text


class PromptCounter:
    """cl100k_base tokens of a request's messages: content + 4 per message (this service's per-message
    overhead), cached by text."""

    def __init__(self, tiktoken_dir: Path) -> None:
        from rag_core.settings import TokenSettings
        from rag_core.tokens import make_counter

        self._counter = make_counter(TokenSettings(cache_dir=str(tiktoken_dir)))
        self._cache: dict[str, int] = {}

    def text(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self._counter.count(text)
        return n

    def request(self, request: dict[str, Any]) -> int:

        msgs = request.get("messages") or []
        return sum(self.text(message_text(m.get("content"))) + 4 for m in msgs if isinstance(m, dict))


def request_text(request: dict[str, Any]) -> str:

    return "\n".join(message_text(m.get("content")) for m in request.get("messages") or [] if isinstance(m, dict))


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None and cur_lo is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None and cur_lo is not None:
        total += cur_hi - cur_lo
    return total


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def analyze(
    run: dict[str, Any], records: list[dict[str, Any]], counter: PromptCounter, order_numbers: dict[str, str]
) -> dict[str, Any]:
    """Per turn: wall time, time inside the upstream (server side, critical-path calls only), calls,
    prompt tokens; per conversation: whether round 1's order number reaches the last round's prompts."""
    records = sorted(records, key=lambda r: r["t0"])
    for r in records:
        r["tokens"] = counter.request(r["request"])
    used: set[int] = set()
    convs = []
    for conv in run["conversations"]:
        turns = conv["turns"]
        out_turns = []
        for i, t in enumerate(turns):
            lo, end = t["start"], t["end"]
            hi = turns[i + 1]["start"] if i + 1 < len(turns) else conv["end"]
            mine = [(j, r) for j, r in enumerate(records) if lo <= r["t0"] < hi]
            used.update(j for j, _ in mine)
            # Critical path: the turn's own calls, started before it returned. The server stamps t1 after its
            # last write, which on a busy machine can land after the client has already returned: clip to the
            # turn's end, and count overlapping intervals once.
            crit = [r for _, r in mine if r["kind"] != "summary" and r["t0"] <= end]
            bg = [r for _, r in mine if r["kind"] == "summary" or r["t0"] > end]
            upstream_s = union_length([(r["t0"], min(r["t1"], end)) for r in crit])
            wall_ms = (end - lo) * 1000
            order = order_numbers.get(conv["id"], "\0")
            out_turns.append(
                {
                    "round": t["round"],
                    "wall_ms": wall_ms,
                    "upstream_ms": upstream_s * 1000,
                    "overhead_ms": wall_ms - upstream_s * 1000,
                    "calls": len(crit),
                    "calls_by_kind": {k: sum(1 for r in crit if r["kind"] == k) for k in ("rewrite", "answer")},
                    "bg_calls": len(bg),
                    "prompt_tokens": sum(r["tokens"] for r in crit),
                    "bg_prompt_tokens": sum(r["tokens"] for r in bg),
                    "max_request_tokens": max((r["tokens"] for _, r in mine), default=0),
                    "order_in_prompt": any(order in request_text(r["request"]) for r in crit),
                    "order_in_answer_prompt": any(
                        order in request_text(r["request"]) for r in crit if r["kind"] == "answer"
                    ),
                }
            )
        convs.append({"id": conv["id"], "turns": out_turns})
    cal = run["calibration"]
    cal_server = [(r["t1"] - r["t0"]) * 1000 for r in records if cal["start"] <= r["t0"] <= cal["end"]]
    return {
        "conversations": convs,
        "unassigned_requests": len(records) - len(used),
        "calibration_wall_ms_p50": percentile(cal["wall_ms"], 0.5),
        "calibration_server_ms_p50": percentile(cal_server, 0.5),
        "ru_maxrss_mb": run["ru_maxrss_kb"] / 1024,
        "startup_s": run["startup_s"],
        "import_s": run.get("import_s"),
    }


def run_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one run that the report aggregates."""
    turns = [t for c in summary["conversations"] for t in c["turns"]]
    by_conv = {c["id"]: c["turns"] for c in summary["conversations"]}

    def at_round(conv: str, rnd: int, key: str) -> Any:
        ts = by_conv.get(conv, [])
        return ts[rnd - 1][key] if len(ts) >= rnd else None

    last = {cid: ts[-1] for cid, ts in by_conv.items() if ts}
    return {
        "overhead_p50": percentile([t["overhead_ms"] for t in turns], 0.5),
        "overhead_p95": percentile([t["overhead_ms"] for t in turns], 0.95),
        "latency_p50": percentile([t["wall_ms"] for t in turns], 0.5),
        "latency_p95": percentile([t["wall_ms"] for t in turns], 0.95),
        "calls_per_turn": statistics.fmean(t["calls"] for t in turns),
        "rewrite_calls_per_turn": statistics.fmean(t["calls_by_kind"]["rewrite"] for t in turns),
        "bg_calls_per_turn": statistics.fmean(t["bg_calls"] for t in turns),
        "tokens_r10": {cid: at_round(cid, 10, "prompt_tokens") for cid in by_conv},
        "tokens_r30": {cid: at_round(cid, 30, "prompt_tokens") for cid in by_conv},
        "tokens_last": {cid: t["prompt_tokens"] for cid, t in last.items()},
        "tokens_mean": statistics.fmean(t["prompt_tokens"] + t["bg_prompt_tokens"] for t in turns),
        "max_request_tokens": max(t["max_request_tokens"] for t in turns),
        "order_last": {cid: t["order_in_prompt"] for cid, t in last.items()},
        "order_last_answer": {cid: t["order_in_answer_prompt"] for cid, t in last.items()},
        "rss_mb": summary["ru_maxrss_mb"],
        "startup_s": summary["startup_s"],
        "import_s": summary.get("import_s"),
        "calibration_wall_ms_p50": summary["calibration_wall_ms_p50"],
        "calibration_server_ms_p50": summary["calibration_server_ms_p50"],
        "unassigned_requests": summary["unassigned_requests"],
    }
