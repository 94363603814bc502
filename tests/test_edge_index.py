"""The embedded Qdrant Edge index, on its own (no model: four-dimensional vectors)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np

from rag_core.lexical import SparseVec
from rag_core.settings import QdrantSettings
from rag_core.vectorstore import ChunkPoint
from rag_core.vectorstore.edge import EdgeIndex


def point(vector: list[float], text: str) -> ChunkPoint:
    dense = np.asarray(vector, dtype=np.float32)
    payload = {"doc_id": "d1", "text": text, "lang": "en"}
    return ChunkPoint(str(uuid.uuid4()), dense, SparseVec([], []), payload)


async def test_a_tenant_without_a_shard_finds_nothing_until_it_has_one(tmp_path: Path) -> None:
    index = EdgeIndex(QdrantSettings(path=str(tmp_path), collection="chunks", engine="edge"), 4, "test-embedder")
    query = np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    try:
        assert await index.search(query, None, 5, 60, tenant="acme") == []
        assert "acme" not in await index.tenants()  # asking created nothing
        await index.upsert([point([1.0, 0.1, 0.0, 0.0], "Returns within 14 days.")], tenant="acme")
        found = await index.search(query, None, 5, 60, tenant="acme")
        assert [h.payload["text"] for h in found] == ["Returns within 14 days."]
        assert await index.search(query, None, 5, 60) == []  # the default tenant's shard is still empty
    finally:
        await index.close()
