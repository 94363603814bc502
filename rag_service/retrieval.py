"""Retrieval: embed the query, search Qdrant (dense, or dense + BM25 fused by RRF), then fill the chunk
budget greedily by score with whole chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag_service.domain import Chunk
from rag_service.embedding import Embedder
from rag_service.lexical import query_vector
from rag_service.settings import RetrievalSettings
from rag_service.vectorstore import ScoredChunk, VectorIndex


@dataclass(frozen=True, slots=True)
class Retriever:
    index: VectorIndex
    embedder: Embedder
    settings: RetrievalSettings

    def search(self, query: str, limit: int | None = None, *, tenant: str | None = None) -> list[Chunk]:
        """Candidates for `query` from `tenant`'s documents (None: the default tenant's)."""
        dense = self.embedder.embed_query(query)
        sparse = query_vector(query) if self.settings.mode == "hybrid" else None
        hits = self.index.search(dense, sparse, limit or self.settings.candidates, self.settings.rrf_k, tenant=tenant)
        return [_to_chunk(h) for h in hits]


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
    )
