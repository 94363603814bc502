"""Retrieval: embed the query, search Qdrant (dense, or dense + BM25 fused by RRF), then fill the chunk
budget greedily by score with whole chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag_service.domain import Chunk
from rag_service.embedding import Embedder
from rag_service.facts import language
from rag_service.lexical import query_vector
from rag_service.rerank import other_language, rerank
from rag_service.settings import RetrievalSettings
from rag_service.vectorstore import ScoredChunk, VectorIndex


@dataclass(frozen=True, slots=True)
class Retriever:
    index: VectorIndex
    embedder: Embedder
    settings: RetrievalSettings

    def search(self, query: str, limit: int | None = None) -> list[Chunk]:
        cfg = self.settings
        n = limit or cfg.candidates
        dense = self.embedder.embed_query(query)
        sparse = query_vector(query) if cfg.mode == "hybrid" else None
        hits = self.index.search(dense, sparse, max(n, cfg.rerank_pool) if cfg.rerank else n, cfg.rrf_k)
        chunks = [_to_chunk(h) for h in hits]
        if not cfg.rerank or not chunks:
            return chunks[:n]
        # The embedder ranks the question's own language first: make sure the other language's best
        # chunks are in the pool (an English question whose answer is on a Chinese page).
        if cfg.other_language_chunks:
            seen = {c.id for c in chunks}
            extra = self.index.search(dense, None, cfg.other_language_chunks, cfg.rrf_k, lang=other_language(query))
            chunks.extend(c for c in map(_to_chunk, extra) if c.id not in seen)
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


def _language(chunk: Chunk) -> str:
    return chunk.lang or language(chunk.text)


def _rrf_scale(chunks: Sequence[Chunk]) -> float:
    # Fused scores are reciprocal ranks (~0.03 at most), not cosines: bonuses shrink to their spread.
    scores = [c.score for c in chunks]
    return (max(scores) - min(scores)) / 0.12 if len(scores) > 1 else 1.0


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
    )
