"""Retrieval: embed the query, search Qdrant (dense, or dense + BM25 fused by RRF), then fill the chunk
budget greedily by score with whole chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag_core.embedding import Embedder, embed_query_off_loop
from rag_core.lexical import query_vector
from rag_core.settings import RetrievalSettings
from rag_core.vectorstore import ScoredChunk, VectorIndex
from rag_service.domain import Chunk
from rag_service.rerank import other_language, rerank


@dataclass(frozen=True, slots=True)
class Retriever:
    index: VectorIndex
    embedder: Embedder
    settings: RetrievalSettings

    async def search(self, query: str, limit: int | None = None, *, tenant: str | None = None) -> list[Chunk]:
        """Candidates for `query` from `tenant`'s documents (None: the default tenant's)."""
        cfg = self.settings
        n = limit or cfg.candidates
        dense = await embed_query_off_loop(self.embedder, query)
        sparse = query_vector(query) if cfg.mode == "hybrid" else None
        if not cfg.rerank:
            return [_to_chunk(h) for h in await self.index.search(dense, sparse, n, cfg.rrf_k, tenant=tenant)]
        # A wide pool with only the language of each hit (cheap), narrowed to the best `n` plus the other
        # language's best: the embedder ranks the question's own language first, and an English question
        # may have its answer on a Chinese page. Whole payloads are read for the narrowed pool only.
        other = other_language(query)
        pool = await self.index.pool(dense, sparse, max(n, cfg.rerank_pool), cfg.rrf_k, tenant=tenant)
        picked = [(i, score) for i, score, _ in pool[:n]]
        others = [(i, score) for i, score, lang in pool[n:] if lang == other][: cfg.other_language_chunks]
        have = sum(lang == other for _, _, lang in pool[:n]) + len(others)
        # (Dense scores only: fused hybrid scores are reciprocal ranks and would not compare.)
        if cfg.mode == "dense" and have < cfg.other_language_chunks and len(pool) >= cfg.rerank_pool:
            seen = {i for i, _, _ in pool}
            extra = await self.index.search(
                dense, None, cfg.other_language_chunks, cfg.rrf_k, tenant=tenant, lang=other, payload=False
            )
            others.extend((h.id, h.score) for h in extra if h.id not in seen)
        hits = picked + others[: cfg.other_language_chunks]
        payloads = await self.index.payloads([i for i, _ in hits], tenant)
        chunks = [_to_chunk(ScoredChunk(i, score, payloads[i])) for i, score in hits if i in payloads]
        scale = 1.0 if cfg.mode == "dense" else _rrf_scale(chunks)
        return rerank(query, chunks, scale)[:n]


def fill_budget(chunks: Sequence[Chunk], budget: int, max_chunks: int, cost: Callable[[Chunk], int]) -> list[Chunk]:
    """Best-scored whole chunks while they fit; a chunk too big for what is left is skipped, not cut."""
    picked: list[Chunk] = []
    left = budget
    for chunk in chunks:
        c = cost(chunk)
        if c <= left:
            picked.append(chunk)
            left -= c
            if len(picked) >= max_chunks:
                break
    return picked


def _rrf_scale(chunks: Sequence[Chunk]) -> float:
    # Fused scores are reciprocal ranks (~0.03 at most), not cosines (a pool's cosines spread over ~0.2):
    # the bonuses shrink in proportion.
    scores = [c.score for c in chunks]
    return (max(scores) - min(scores)) / 0.2 if len(scores) > 1 else 1.0


def _to_chunk(hit: ScoredChunk) -> Chunk:
    p = hit.payload
    return Chunk(
        id=hit.id,
        doc_id=str(p.get("doc_id", "")),
        source=str(p.get("source", "")),
        title=str(p.get("title", "")),
        text=str(p.get("text", "")),
        score=hit.score,
        token_count=int(p.get("token_count", 0)),
        section=str(p.get("section", "")),
        lang=str(p.get("lang", "")),
        index=int(p.get("chunk_index", 0)),
    )
