"""What every vector-store backend stores and answers, and the interface the service and ingestion use.

Each point carries a dense vector ("dense") and a BM25-style sparse vector ("bm25", IDF applied by the
engine) plus the payload {tenant, doc_id, source, title, chunk_index, text, content_hash, token_count,
section, lang}.

Tenants are kept apart by collection (a shard, for Qdrant Edge): a search reads one tenant's collection and
nothing else (docs/tenancy.md). The `tenant` payload field stays on every point, so a deployment that
outgrows a collection per tenant can move to payload partitioning on a server without re-embedding.

The interface is async: a Qdrant server is a network round trip, and an embedded engine's writes run off
the event loop, so no caller holds the loop for either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rag_core.lexical import SparseVec
from rag_core.settings import DEFAULT_TENANT

DENSE = "dense"
SPARSE = "bm25"
# Between the configured collection name and a tenant's name (tenant names are [A-Za-z0-9_.-]).
TENANT_INFIX = "__tenant_"
# Payload fields with a keyword index: deletes and scrolls by document, the language filter, and the
# tenant (a server partitions a shared collection by it, should a deployment move to one).
INDEXED_FIELDS = ("doc_id", "tenant", "lang")


class IndexBusyError(RuntimeError):
    """An embedded index (Edge shard or local-mode folder) is owned by another process."""


class IndexSchemaError(RuntimeError):
    pass


@dataclass(frozen=True)
class ChunkPoint:
    id: str
    dense: npt.NDArray[np.float32]
    sparse: SparseVec
    payload: dict[str, Any]


@dataclass(frozen=True)
class ScoredChunk:
    id: str
    score: float
    payload: dict[str, Any]


def collection_for(collection: str, tenant: str | None) -> str:
    """`collection` itself for the default tenant (an index built before documents had tenants is that
    tenant's), and `{collection}__tenant_{name}` for each other tenant."""
    if tenant is None or tenant == DEFAULT_TENANT:
        return collection
    return f"{collection}{TENANT_INFIX}{tenant}"


def tenant_of(collection: str, name: str) -> str | None:
    """The tenant whose collection `name` is (None: not one of this index's collections)."""
    if name == collection:
        return DEFAULT_TENANT
    prefix = f"{collection}{TENANT_INFIX}"
    return name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else None


class VectorIndex(Protocol):
    """One collection per tenant; every method takes the tenant (None: the default tenant)."""

    dim: int
    collection: str  # the default tenant's; a tenant's is `collection_for(collection, tenant)`

    async def upsert(self, points: Sequence[ChunkPoint], tenant: str | None = None) -> None: ...

    async def doc_point_ids(self, doc_id: str, tenant: str | None = None) -> set[str]: ...

    async def delete_ids(self, ids: Iterable[str], tenant: str | None = None) -> None: ...

    async def delete_doc(self, doc_id: str, tenant: str | None = None) -> int:
        """Chunks removed (0: the document is not in the tenant's collection)."""
        ...

    async def search(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        *,
        tenant: str | None = None,
        lang: str | None = None,
        payload: bool | list[str] = True,
    ) -> list[ScoredChunk]:
        """The nearest chunks among `tenant`'s documents: dense + BM25 fused by RRF when `sparse` has
        terms, else dense only; `lang` keeps only chunks of that language (dense only); `payload` names
        the payload fields to return (all by default)."""
        ...

    async def pool(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        *,
        tenant: str | None = None,
    ) -> list[tuple[str, float, str]]:
        """(id, score, language) of `tenant`'s top `limit` chunks, without their payloads. Every backend
        inherits this one: it is `search` asking for the language field only."""
        hits = await self.search(dense, sparse, limit, rrf_k, tenant=tenant, payload=["lang"])
        return [(h.id, h.score, str(h.payload.get("lang", ""))) for h in hits]

    async def matching(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec,
        limit: int,
        within: int,
        *,
        lang: str,
        tenant: str | None = None,
    ) -> list[tuple[str, float]]:
        """(id, dense score) of the `limit` chunks nearest to `dense` among the `within` best BM25 matches of
        `sparse` in `tenant`'s chunks of language `lang`: chunks that have some of the given words (a
        question's concepts in the other language), ranked by the dense score the pool ranks by."""
        ...

    async def payloads(self, ids: Sequence[str], tenant: str | None = None) -> dict[str, dict[str, Any]]: ...

    def writes(self, tenant: str | None = None) -> int | None:
        """How many writes this process made to `tenant`'s collection (what is derived from its contents is kept
        while this stays); None for a server's, which other processes write to as well."""
        ...

    async def stats(self, tenant: str | None = None) -> dict[str, int]: ...

    async def documents(self, tenant: str | None = None) -> dict[str, dict[str, Any]]:
        """doc_id -> {source, title, chunks}, for `tenant`'s documents."""
        ...

    async def tenants(self) -> list[str]:
        """The tenants with a collection in this index."""
        ...

    def export(self, tenant: str | None, batch: int = 256) -> AsyncIterator[list[ChunkPoint]]:
        """Every point of `tenant`'s collection with its vectors and payload (for pushing an index on)."""
        ...

    async def optimize(self) -> None:
        """Build what the engine builds in the background on a server (Edge: the HNSW graphs)."""
        ...

    def sibling(self, collection: str) -> VectorIndex:
        """Another collection (and its tenants' collections) of the same store, with the same schema,
        sharing this index's client or folder (FAQ entries live beside the chunks). One object per name;
        closing this index closes its siblings too."""
        ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


async def copy_index(
    source: VectorIndex, target: VectorIndex, batch: int = 256, on_points: Callable[[str, int], None] | None = None
) -> dict[str, int]:
    """Every tenant's points of `source` upserted into `target` (same ids, vectors and payloads, so a
    re-run or an interrupted run is safe to repeat); tenant -> points copied."""
    copied: dict[str, int] = {}
    for tenant in await source.tenants():
        copied[tenant] = 0
        async for points in source.export(tenant, batch):
            await target.upsert(points, tenant)
            copied[tenant] += len(points)
            if on_points is not None:
                on_points(tenant, len(points))
    return copied
