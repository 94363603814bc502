"""The FAQ short path: a question that matches an FAQ question closely enough is answered with the
entry's answer, without an LLM call.

Entries are the `{collection}__faq` points written by ingest (rag_core/documents/faq.py) and by
annotations. The match is the nearest FAQ question in the query's own language, by cosine between the
two questions embedded as queries; an answer in the other language would have to be translated, which
is the LLM's job (below the threshold the entry is an ordinary context chunk, and the model translates).
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_core.embedding import Embedder, embed_query_off_loop
from rag_core.settings import FaqSettings
from rag_core.text import language
from rag_core.vectorstore import VectorIndex
from rag_service.domain import Chunk
from rag_service.filler import search_text

MODE = "faq"
# Not a retrieval knob: one nearest entry is all the short path needs.
_RRF_K = 60


@dataclass(frozen=True, slots=True)
class FaqHit:
    id: str
    doc_id: str
    source: str
    title: str
    question: str
    answer: str
    score: float

    def chunk(self, token_count: int) -> Chunk:
        """The entry as the turn's one source."""
        return Chunk(
            id=self.id,
            doc_id=self.doc_id,
            source=self.source,
            title=self.title,
            text=f"{self.question}\n{self.answer}",
            score=self.score,
            token_count=token_count,
            lang=language(self.question),
        )


@dataclass(frozen=True, slots=True)
class FaqMatcher:
    index: VectorIndex
    embedder: Embedder
    settings: FaqSettings

    async def nearest(self, query: str, tenant: str | None = None) -> FaqHit | None:
        """The tenant's FAQ entry nearest to `query` in its language, whatever its score."""
        # As retrieval embeds it (`search_text`): the turn's one query embedding serves both.
        dense = await embed_query_off_loop(self.embedder, search_text(query))
        hits = await self.index.search(dense, None, 1, _RRF_K, tenant=tenant, lang=language(query))
        if not hits:
            return None
        p = hits[0].payload
        return FaqHit(
            id=hits[0].id,
            doc_id=str(p.get("doc_id", "")),
            source=str(p.get("source", "")),
            title=str(p.get("title", "")),
            question=str(p.get("question", "")),
            answer=str(p.get("answer", "")),
            score=hits[0].score,
        )

    async def match(self, query: str, tenant: str | None = None) -> FaqHit | None:
        """The entry that answers `query` on the short path, or None (the turn goes on as usual)."""
        if not self.settings.short_path:
            return None
        hit = await self.nearest(query, tenant)
        return hit if hit is not None and hit.answer and hit.score >= self.settings.threshold else None
