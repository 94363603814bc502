"""Local mode's pool and payload reads, taken straight from the collection's arrays, answer what
qdrant-client's own `query_points` / `retrieve` answer (ids, order, languages, payloads), deleted points
and other tenants included."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from rag_core.lexical import SparseVec
from rag_core.settings import QdrantSettings
from rag_core.vectorstore.base import ChunkPoint, VectorIndex
from rag_core.vectorstore.qdrant import QdrantIndex, _local_payloads, _local_pool

DIM = 16


def _points(rng: np.random.Generator, n: int) -> list[ChunkPoint]:
    out = []
    for i in range(n):
        payload = {
            "doc_id": f"doc-{i % 7}",
            "title": f"Gadget {i % 7}",
            "text": f"Part {i} of the manual of gadget {i % 7}.",
            "lang": "en" if i % 3 else "zh",
            "chunk_index": i,
            "tags": [f"t{i % 2}", {"nested": i}],
        }
        dense = rng.standard_normal(DIM).astype(np.float32)
        out.append(ChunkPoint(str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")), dense, SparseVec([], []), payload))
    return out


@pytest.fixture
async def index(tmp_path: Path) -> QdrantIndex:
    idx = QdrantIndex.open(QdrantSettings(path=str(tmp_path / "q"), collection="kb", engine="local"), DIM, "test")
    rng = np.random.default_rng(7)
    points = _points(rng, 60)
    await idx.upsert(points)
    await idx.upsert(_points(rng, 10), tenant="other")
    await idx.delete_ids([points[3].id, points[11].id])
    return idx


async def test_the_local_pool_ranks_as_query_points_does(index: QdrantIndex) -> None:
    rng = np.random.default_rng(3)
    # the fast path is taken with this qdrant-client (not its fallback to the public API)
    assert _local_pool(index.client, "kb", rng.standard_normal(DIM).astype(np.float32), 3) is not None
    assert _local_payloads(index.client, "kb", []) == {}
    for limit in (5, 30, 200):
        query = rng.standard_normal(DIM).astype(np.float32)
        fast = await index.pool(query, None, limit, 60)
        slow = await VectorIndex.pool(index, query, None, limit, 60)
        assert [(i, lang) for i, _, lang in fast] == [(i, lang) for i, _, lang in slow]
        # local mode renormalises the stored vectors on every query: scores may move in the last bit
        assert np.allclose([s for _, s, _ in fast], [s for _, s, _ in slow], rtol=0, atol=1e-9)
    assert len(await index.pool(rng.standard_normal(DIM).astype(np.float32), None, 200, 60)) == 58
    assert await index.pool(rng.standard_normal(DIM).astype(np.float32), None, 5, 60, tenant="nobody") == []


async def test_local_payloads_are_retrieve_s_copies(index: QdrantIndex) -> None:
    query = np.ones(DIM, dtype=np.float32)
    ids = [i for i, _, _ in await index.pool(query, None, 20, 60)]
    gone = str(uuid.uuid5(uuid.NAMESPACE_URL, "p3"))
    asked = [*ids, gone, str(uuid.uuid4())]
    fast = await index.payloads(asked)
    records = await index.client.retrieve("kb", ids=asked, with_payload=True, with_vectors=False)
    assert fast == {str(r.id): dict(r.payload or {}) for r in records}
    assert gone not in fast and len(fast) == 20
    # a caller's change to what it was handed is not the index's
    fast[ids[0]]["tags"].append("mine")
    fast[ids[0]]["title"] = "changed"
    again = await index.payloads([ids[0]])
    assert "mine" not in again[ids[0]]["tags"] and again[ids[0]]["title"] != "changed"
