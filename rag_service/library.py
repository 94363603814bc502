"""The knowledge base as the service's document routes use it: a tenant's documents added (through the
core's document pipeline), listed and removed. Every write keeps the FAQ collection (`faq_index`, the
entries of FAQ files and annotations) in step with the chunks."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from rag_core.documents.office import FaqPair
from rag_core.documents.pipeline import IngestReport, delete_document, doc_id_for, ingest_file, write_document
from rag_core.embedding import Embedder
from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import VectorIndex


class Library:
    def __init__(
        self,
        settings: Settings,
        index: VectorIndex,
        embedder: Embedder,
        counter: TokenCounter,
        *,
        faq_index: VectorIndex | None = None,
    ) -> None:
        self.settings, self.index, self.embedder, self.counter = settings, index, embedder, counter
        self.faq_index = faq_index
        self._locks: defaultdict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)

    def lock(self, tenant: str, source: str) -> asyncio.Lock:
        """Held while a document is (re)ingested: two uploads of one document at once would each delete
        the other's fresh chunks."""
        return self._locks[(tenant, source)]

    async def ingest(self, path: Path, source: str, tenant: str, cancel: threading.Event) -> IngestReport:
        """Parsing and embedding run off the event loop inside the pipeline; `cancel` stops it at its next check."""
        return await ingest_file(
            path,
            index=self.index,
            embedder=self.embedder,
            counter=self.counter,
            settings=self.settings,
            source=source,
            tenant=tenant,
            cancel=cancel,
            faq_index=self.faq_index,
        )

    async def write_faq(self, source: str, tenant: str, title: str, pairs: list[FaqPair]) -> IngestReport:
        """A document made of FAQ pairs alone, without a file (an annotation), brought up to date."""
        async with self.lock(tenant, source):
            return await write_document(
                title,
                iter(()),
                pairs,
                index=self.index,
                embedder=self.embedder,
                counter=self.counter,
                settings=self.settings,
                source=source,
                doc_id=doc_id_for(source, tenant),
                tenant=tenant,
                faq_index=self.faq_index,
            )

    async def documents(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's documents by source: doc_id, source, title, chunks."""
        docs = await self.index.documents(tenant)
        ordered = sorted(docs.items(), key=lambda kv: str(kv[1]["source"]))
        return [{"doc_id": k, **v} for k, v in ordered]

    async def delete(self, doc_id: str, tenant: str) -> int:
        """Points removed (chunks and FAQ entries): 0 when the tenant has no such document."""
        return await delete_document(self.index, doc_id, tenant, self.faq_index)

    async def faq_entries(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's FAQ entries (from FAQ files and annotations), grouped by answer: doc_id, source,
        answer, questions."""
        index = self.faq_index
        if index is None:
            return []
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for doc_id in await index.documents(tenant):
            ids = sorted(await index.doc_point_ids(doc_id, tenant))
            for p in (await index.payloads(ids, tenant)).values():
                key = (doc_id, str(p.get("answer", "")))
                entry = out.setdefault(
                    key, {"doc_id": doc_id, "source": p.get("source"), "answer": key[1], "questions": []}
                )
                entry["questions"].append(p.get("question"))
        return sorted(out.values(), key=lambda e: (str(e["source"]), str(e["answer"])))
