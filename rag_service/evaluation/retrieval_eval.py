"""Multi-turn retrieval quality under several query modes.

The corpus is embedded once (through the on-disk `EmbeddingCache`) into a temporary local Qdrant, one
collection per domain (the benchmark retrieves per domain). Every turn with gold passages is searched
with the query each mode makes:

- none: the question as asked;         concat: all previous questions + the question;
- rule / llm: the service's rewriters over the conversation (history answers are the dataset's);
- reference: the dataset's reference rewrite (the question when there is none).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag_core.lexical import document_vector, query_vector
from rag_core.settings import QdrantSettings, RetrievalSettings
from rag_core.vectorstore import ChunkPoint, VectorIndex, open_index
from rag_service.domain import MemoryView, Message, Round
from rag_service.evaluation.cache import CachingEmbedder
from rag_service.evaluation.data import Conversation, Passage
from rag_service.evaluation.metrics import mean_scores, turn_scores
from rag_service.filler import search_text
from rag_service.rewrite import Rewriter

MODES = ("none", "concat", "rule", "llm", "reference")
HALVES = ("A", "B")


def split_half(ids: Iterable[str], half: str) -> set[str]:
    """Half "A" or "B" of the distinct conversation ids: ordered by sha256 of the id, the first ceil(n/2)
    are A. Deterministic and balanced, and independent of the file's order, so rules can be written
    looking only at A and checked on B."""
    if half not in HALVES:
        raise ValueError(f"half is A or B, not {half!r}")
    ordered = sorted(set(ids), key=lambda i: hashlib.sha256(i.encode()).hexdigest())
    cut = (len(ordered) + 1) // 2
    return set(ordered[:cut] if half == "A" else ordered[cut:])


@dataclass
class EvalTurn:
    conv_id: str
    domain: str
    position: int
    gold: tuple[str, ...]
    queries: dict[str, str] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class RetrievalReport:
    results: dict[str, dict[str, dict[str, float]]]
    counts: dict[str, int]
    actions: dict[str, Counter[str]]
    turns: list[EvalTurn]
    # The rewriters' actions on turns after the first (skipped / rule / skipped (topic switch) ...).
    later_actions: dict[str, Counter[str]] = field(default_factory=dict)


def view_of(turns: Sequence[tuple[str, str]]) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 0, 0.0), Message("assistant", a, 0, 0.0)) for q, a in turns)
    return MemoryView("", 0, rounds)


async def build_queries(
    conversations: Sequence[Conversation],
    modes: Sequence[str],
    rewriters: dict[str, Rewriter],
    later: dict[str, Counter[str]] | None = None,
) -> tuple[list[EvalTurn], dict[str, Counter[str]]]:
    """The query of every mode for every turn with gold passages, and the rewriters' actions (also counted
    into `later` for turns after the first)."""
    out: list[EvalTurn] = []
    actions: dict[str, Counter[str]] = {m: Counter() for m in rewriters}
    for conv in conversations:
        for i, turn in enumerate(conv.turns):
            if not turn.gold:
                continue
            history = [(t.question, t.answer) for t in conv.turns[:i]]
            item = EvalTurn(conv.conv_id, conv.domain, i, turn.gold)
            for mode in modes:
                if mode == "none":
                    item.queries[mode] = turn.question
                elif mode == "concat":
                    item.queries[mode] = " ".join([*(q for q, _ in history), turn.question])
                elif mode == "reference":
                    item.queries[mode] = turn.reference or turn.question
                else:
                    result = await rewriters[mode].rewrite(turn.question, view_of(history))
                    item.queries[mode] = result.query
                    label = result.action + (" (topic switch)" if result.topic_switch else "")
                    actions[mode][label] += 1
                    if later is not None and i > 0:
                        later.setdefault(mode, Counter())[label] += 1
            out.append(item)
    return out, actions


async def index_corpus(
    index: VectorIndex,
    corpus: Sequence[Passage],
    embedder: CachingEmbedder,
    settings: RetrievalSettings,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, str]:
    """One tenant per domain (domain -> tenant); vectors come from the cache (embedding only what it
    lacks)."""
    vectors = embedder.cache.embed([p.text for p in corpus], "passage", embedder.inner.embed_passages, 32, progress)
    by_domain: dict[str, list[ChunkPoint]] = {}
    for p, vec in zip(corpus, vectors, strict=True):
        sparse = document_vector(p.text, settings.bm25_avg_tokens, settings.bm25_k1, settings.bm25_b)
        point = ChunkPoint(str(uuid.uuid5(uuid.NAMESPACE_URL, p.doc_id)), vec, sparse, {"doc_id": p.doc_id})
        by_domain.setdefault(p.domain, []).append(point)
    tenants: dict[str, str] = {}
    for domain, points in by_domain.items():
        tenant = f"eval_{re.sub(r'[^A-Za-z0-9_.-]', '_', domain) or 'all'}"
        for start in range(0, len(points), 256):
            await index.upsert(points[start : start + 256], tenant)
        tenants[domain] = tenant
    return tenants


def evaluate_retrieval(
    conversations: Sequence[Conversation],
    corpus: Sequence[Passage],
    modes: Sequence[str],
    ks: Sequence[int],
    embedder: CachingEmbedder,
    rewriters: dict[str, Rewriter],
    retrieval: RetrievalSettings,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> RetrievalReport:
    depth = max([*ks, 10])

    def progress(done: int, total: int) -> None:
        log(f"embedded {done}/{total} passages not in the cache")

    async def run(
        index: VectorIndex,
    ) -> tuple[list[EvalTurn], dict[str, Counter[str]], dict[str, Counter[str]], dict[str, list[Any]]]:
        tenants = await index_corpus(index, corpus, embedder, retrieval, progress)
        # The raw questions first, in one batch: the rewriters' topic checks then hit the cache.
        questions = [t.question for c in conversations for t in c.turns if t.question]
        embed_queries(embedder, questions)
        later: dict[str, Counter[str]] = {}
        turns, actions = await build_queries(conversations, modes, rewriters, later)
        embed_queries(embedder, [q for t in turns for q in t.queries.values()])
        rows: dict[str, list[Any]] = {m: [] for m in modes}
        for t in turns:
            tenant = tenants.get(t.domain) or tenants.get("")
            if tenant is None:
                raise ValueError(f"no passages for domain {t.domain!r}")
            for mode, query in t.queries.items():
                ranked = await search(index, embedder, query, depth, retrieval, tenant)
                t.scores[mode] = turn_scores(ranked, t.gold, ks)
                rows[mode].append((t.position, t.scores[mode]))
        return turns, actions, later, rows

    async def in_folder(folder: str) -> tuple[Any, ...]:
        # Local mode, as the scores in docs/retrieval-eval.md were made: exact search, and equal scores in
        # the same order every run (Edge orders ties as its segments come, which moves hand-made cases).
        qdrant = QdrantSettings(path=folder, collection="eval", engine="local")
        index = open_index(qdrant, embedder.dim, embedder.name)
        try:
            return await run(index)
        finally:
            await index.close()

    with tempfile.TemporaryDirectory(prefix="rag-eval-") as tmp:
        turns, actions, later, rows = asyncio.run(in_folder(tmp))
    results = {
        m: {
            "all": mean_scores([s for _, s in r]),
            "after_first": mean_scores([s for pos, s in r if pos > 0]),
        }
        for m, r in rows.items()
    }
    counts = {"all": len(turns), "after_first": sum(t.position > 0 for t in turns)}
    return RetrievalReport(results, counts, actions, turns, later)


def embed_queries(embedder: CachingEmbedder, queries: Sequence[str]) -> None:
    unique = list(dict.fromkeys(search_text(q) for q in queries if q))
    embedder.cache.embed(unique, "query", lambda ts: np.stack([embedder.inner.embed_query(t) for t in ts]))


async def search(
    index: VectorIndex, embedder: CachingEmbedder, query: str, depth: int, settings: RetrievalSettings, tenant: str
) -> list[str]:
    sparse = query_vector(query) if settings.mode == "hybrid" else None
    # Embedded as the service's retrieval embeds it (without filler).
    hits = await index.search(
        embedder.embed_query(search_text(query)), sparse, max(depth, settings.candidates), settings.rrf_k, tenant=tenant
    )
    ranked = list(dict.fromkeys(str(h.payload.get("doc_id")) for h in hits))
    return ranked[:depth]


_COLUMNS = ("recall@5", "recall@10", "ndcg@10", "mrr")


def markdown_table(results: dict[str, dict[str, dict[str, float]]], counts: dict[str, int] | None = None) -> str:
    metrics = [m for m in _COLUMNS if any(m in r["all"] for r in results.values())]
    extra = sorted({k for r in results.values() for k in r["all"]} - set(metrics))
    metrics += extra
    subsets = ("all", "after_first")
    head = ["mode"] + [f"{s} {m}" for s in subsets for m in metrics]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mode, r in results.items():
        cells = [mode] + [f"{r[s].get(m, float('nan')):.4f}" for s in subsets for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    if counts:
        lines.append("")
        lines.append(f"Turns scored: all = {counts['all']}, after_first = {counts['after_first']}.")
    return "\n".join(lines)


def results_json(results: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    return {m: {s: {k: round(v, 6) for k, v in d.items()} for s, d in r.items()} for m, r in results.items()}
