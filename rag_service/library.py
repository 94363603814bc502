"""The knowledge base as the service's document routes use it: a tenant's documents added (through the
core's document pipeline), listed and removed."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from rag_core.documents.pipeline import IngestReport, delete_document, ingest_file
from rag_core.embedding import Embedder
from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import VectorIndex


class Library:
    def __init__(self, settings: Settings, index: VectorIndex, embedder: Embedder, counter: TokenCounter) -> None:
        self.settings, self.index, self.embedder, self.counter = settings, index, embedder, counter
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
        )

    async def documents(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's documents by source: doc_id, source, title, chunks."""
        docs = await self.index.documents(tenant)
        ordered = sorted(docs.items(), key=lambda kv: str(kv[1]["source"]))
        return [{"doc_id": k, **v} for k, v in ordered]

    async def delete(self, doc_id: str, tenant: str) -> int:
        """Chunks removed: 0 when the tenant has no such document."""
        return await delete_document(self.index, doc_id, tenant)
