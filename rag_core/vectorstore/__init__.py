"""The chunk index: Qdrant Edge in-process by default, a Qdrant server when `qdrant.url` is set, or
qdrant-client's local mode (`qdrant.engine: local`, for folders of earlier versions)."""

from __future__ import annotations

import asyncio

from rag_core.settings import QdrantSettings
from rag_core.vectorstore.base import (
    DENSE,
    SPARSE,
    TENANT_INFIX,
    ChunkPoint,
    IndexBusyError,
    IndexSchemaError,
    ScoredChunk,
    VectorIndex,
    collection_for,
    copy_index,
)

__all__ = [
    "DENSE",
    "SPARSE",
    "TENANT_INFIX",
    "ChunkPoint",
    "IndexBusyError",
    "IndexSchemaError",
    "ScoredChunk",
    "VectorIndex",
    "check_free",
    "collection_for",
    "copy_index",
    "open_index",
]


def open_index(settings: QdrantSettings, dim: int, embedder_name: str) -> VectorIndex:
    """The index the settings name. Raises IndexBusyError at once when another process owns an embedded
    index, and IndexSchemaError when an Edge shard was built for another embedder."""
    if settings.url or settings.engine == "local":
        from rag_core.vectorstore.qdrant import QdrantIndex

        return QdrantIndex.open(settings, dim, embedder_name)
    from rag_core.vectorstore.edge import EdgeIndex

    return EdgeIndex(settings, dim, embedder_name)


def check_free(settings: QdrantSettings) -> None:
    """Raises IndexBusyError when another process owns the embedded index the settings name (cheap: no
    model, no schema; a server is never busy)."""
    if settings.url:
        return
    if settings.engine == "local":
        from rag_core.vectorstore.qdrant import open_client

        client = open_client(settings)
        asyncio.run(client.close())
        return
    from rag_core.vectorstore.edge import check_free as edge_free

    edge_free(settings)
