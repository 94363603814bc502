"""A Qdrant server through `AsyncQdrantClient` (`qdrant.url`), or qdrant-client's local mode
(`qdrant.engine: local`).

Every call is awaited, so a server's round trip (or its timeout) never holds the event loop. Local mode is
kept for two reasons only: it reads the folders of earlier versions (`rag-ingest --push edge` copies one
into Edge shards), and it runs this module's code, the server path, on a machine without a Qdrant server
(the tests do). It scans every point on every query and evaluates filters in Python (docs/benchmarks.md),
so it is no serving default any more.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.local.distances import DistanceOrder, calculate_distance, distance_to_order
from qdrant_client.local.utils import normalize_point_id

from rag_core.lexical import SparseVec
from rag_core.settings import QdrantSettings
from rag_core.vectorstore.base import (
    DENSE,
    INDEXED_FIELDS,
    SPARSE,
    ChunkPoint,
    IndexBusyError,
    IndexSchemaError,
    ScoredChunk,
    VectorIndex,
    collection_for,
    tenant_of,
)
from rag_core.vectorstore.memo import MEMO_FIELDS, FieldsMemo, Table, memo_only, pick

SCROLL_PAGE = 2048


# What `_in_memory` reads of qdrant-client's `LocalCollection`.
_LOCAL_WORDS_PARTS = (
    "sparse_vectors",
    "sparse_vectors_idf",
    "config",
    "payload",
    "ids_inv",
    "_payload_and_non_deleted_mask",
)
_LOCAL_COLLECTION_PARTS = (
    "vectors",
    "payload",
    "ids",
    "ids_inv",
    "deleted",
    "get_vector_params",
    "_payload_and_non_deleted_mask",
)


class QdrantIndex(VectorIndex):
    """Collections are made on a tenant's first write, with the same schema; another worker may add
    more at any time, so the ones known to exist are only a cache."""

    def __init__(self, client: AsyncQdrantClient, collection: str, dim: int, embedder_name: str) -> None:
        self.client, self.collection, self.dim = client, collection, dim
        self._embedder_name = embedder_name
        self._local = type(client._client).__name__ == "AsyncQdrantLocal"
        self._ready: set[str] = set()
        self._hnsw_ef: int | None = None
        self._siblings: dict[str, QdrantIndex] = {}
        # Local mode only (its folder is locked by this process, the collections' only writer): each
        # collection's MEMO_FIELDS per point. Local mode copies each hit's payload and the retrieval pool
        # reads the language of ~100-200 hits a turn.
        self._fields = FieldsMemo()
        self._words: dict[str, tuple[int, _LocalWords]] = {}
        # A sibling uses its parent's client; only the parent closes it.
        self._owns_client = True

    @classmethod
    def open(cls, settings: QdrantSettings, dim: int, embedder_name: str) -> QdrantIndex:
        index = cls(open_client(settings), settings.collection, dim, embedder_name)
        index._hnsw_ef = settings.hnsw_ef
        return index

    async def _writable(self, tenant: str | None) -> str:
        name = collection_for(self.collection, tenant)
        if name not in self._ready:
            await self._ensure_collection(name, create=True)
        return name

    async def _readable(self, tenant: str | None) -> str | None:
        """The tenant's collection, or None when the tenant has never stored a document."""
        name = collection_for(self.collection, tenant)
        if name in self._ready or await self._ensure_collection(name, create=False):
            return name
        return None

    async def _ensure_collection(self, name: str, *, create: bool) -> bool:
        if await self.client.collection_exists(name):
            await self._check_schema(name)
            self._ready.add(name)
            return True
        if not create:
            return False
        try:
            await self.client.create_collection(
                name,
                vectors_config={DENSE: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                metadata={"embedder": self._embedder_name},
            )
        except Exception:
            # Another worker may have made it a moment ago; then it is there to be checked.
            if not await self.client.collection_exists(name):
                raise
            return await self._ensure_collection(name, create=False)
        # Local mode scans every point anyway and warns about payload indexes; servers need them.
        if not self._local:
            for field in INDEXED_FIELDS:
                await self.client.create_payload_index(
                    name,
                    field,
                    models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=field == "tenant"),
                )
        self._ready.add(name)
        return True

    async def _check_schema(self, name: str) -> None:
        info = await self.client.get_collection(name)
        vectors = info.config.params.vectors
        size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
        if size != self.dim:
            raise IndexSchemaError(
                f"collection {name!r} holds {size}-dimensional vectors but the embedder "
                f"{self._embedder_name} makes {self.dim}; use another qdrant.collection or re-create it"
            )
        stored = (info.config.metadata or {}).get("embedder")
        if stored and stored != self._embedder_name:
            raise IndexSchemaError(
                f"collection {name!r} was built with {stored}, not {self._embedder_name}; "
                "use another qdrant.collection or re-create it"
            )

    async def upsert(self, points: Sequence[ChunkPoint], tenant: str | None = None) -> None:
        if not points:
            return
        name = await self._writable(tenant)
        batch = [
            models.PointStruct(
                id=p.id,
                vector={
                    DENSE: p.dense.tolist(),
                    SPARSE: models.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                },
                payload=p.payload,
            )
            for p in points
        ]
        with self._fields.writing(name):
            await self.client.upsert(name, points=batch, wait=True)

    def writes(self, tenant: str | None = None) -> int | None:
        return self._fields.writes(collection_for(self.collection, tenant)) if self._local else None

    async def doc_point_ids(self, doc_id: str, tenant: str | None = None) -> set[str]:
        ids: set[str] = set()
        name = await self._readable(tenant)
        if name is None:
            return ids
        offset: Any = None
        while True:
            records, offset = await self.client.scroll(
                name, scroll_filter=_doc_filter(doc_id), limit=SCROLL_PAGE, offset=offset,
                with_payload=False, with_vectors=False,
            )  # fmt: skip
            ids.update(str(r.id) for r in records)
            if offset is None:
                return ids

    async def delete_ids(self, ids: Iterable[str], tenant: str | None = None) -> None:
        batch: list[models.ExtendedPointId] = list(ids)
        name = await self._readable(tenant)
        if batch and name is not None:
            with self._fields.writing(name):
                await self.client.delete(name, points_selector=models.PointIdsList(points=batch), wait=True)

    async def delete_doc(self, doc_id: str, tenant: str | None = None) -> int:
        name = await self._readable(tenant)
        if name is None:
            return 0
        n = (await self.client.count(name, count_filter=_doc_filter(doc_id), exact=True)).count
        if n:
            with self._fields.writing(name):
                await self.client.delete(
                    name, points_selector=models.FilterSelector(filter=_doc_filter(doc_id)), wait=True
                )
        return n

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
        name = await self._readable(tenant)
        if name is None:
            return []
        if self._local and memo_only(payload):
            found = await self._from_memory(name, dense, sparse, limit, rrf_k, tenant, lang)
            if found is not None:
                return [ScoredChunk(i, score, pick(known, payload)) for i, score, known in found]
        params = models.SearchParams(hnsw_ef=self._hnsw_ef) if self._hnsw_ef and not self._local else None
        if lang is not None:
            language = in_language(lang)
            response = await self.client.query_points(
                name, query=dense.tolist(), using=DENSE, limit=limit, with_payload=payload,
                query_filter=language, search_params=params,
            )  # fmt: skip
        elif sparse is None or not sparse.indices:
            response = await self.client.query_points(
                name, query=dense.tolist(), using=DENSE, limit=limit, with_payload=payload, search_params=params
            )
        else:
            response = await self.client.query_points(
                name,
                prefetch=[
                    models.Prefetch(query=dense.tolist(), using=DENSE, limit=limit, params=params),
                    models.Prefetch(
                        query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                        using=SPARSE,
                        limit=limit,
                    ),
                ],
                query=models.RrfQuery(rrf=models.Rrf(k=rrf_k)),
                limit=limit,
                with_payload=payload,
            )
        return [ScoredChunk(str(h.id), float(h.score), dict(h.payload or {})) for h in response.points]

    async def pool(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        *,
        tenant: str | None = None,
    ) -> list[tuple[str, float, str]]:
        """As `VectorIndex.pool`; in local mode without a `ScoredChunk` and a payload made per hit (~120 a turn)."""
        name = await self._readable(tenant) if self._local else None
        found = await self._from_memory(name, dense, sparse, limit, rrf_k, tenant, None) if name is not None else None
        if found is not None:
            return [(i, score, str(known.get("lang", ""))) for i, score, known in found]
        return await super().pool(dense, sparse, limit, rrf_k, tenant=tenant)

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
        name = await self._readable(tenant)
        if name is None or not sparse.indices:
            return []
        language = in_language(lang)
        found = self._local_matching(name, dense, sparse, limit, within, language) if self._local else None
        if found is not None:
            return found
        words = models.SparseVector(indices=sparse.indices, values=sparse.values)
        response = await self.client.query_points(
            name,
            prefetch=models.Prefetch(query=words, using=SPARSE, limit=within, filter=language),
            query=dense.tolist(),
            using=DENSE,
            limit=limit,
            with_payload=False,
        )
        return [(str(h.id), float(h.score)) for h in response.points]

    def _local_matching(
        self,
        name: str,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec,
        limit: int,
        within: int,
        language: models.Filter,
    ) -> list[tuple[str, float]] | None:
        """`matching` in local mode: what its query finds, computed as (1) the word search's `within` best of the
        language from the collection's words inverted (`_LocalWords`; local mode scores every point's sparse
        vector in Python, ~10 ms on a few hundred chunks) and (2) their dense scores from the collection's arrays,
        the way `_local_dense` computes them. None when the collection is not in memory here."""
        collection = self._in_memory(name)
        if collection is None or DENSE not in collection.vectors:
            return None
        words = self._words_index(name, collection)
        ids = words.search(sparse, language, within) if words is not None else None
        if ids is None:
            return None
        rows = [collection.ids.get(normalize_point_id(i)) for i in ids]
        if any(r is None for r in rows):
            return None
        distance = collection.get_vector_params(DENSE).distance
        scores = calculate_distance(dense.astype(np.float64), collection.vectors[DENSE][rows], distance)
        reverse = distance_to_order(distance) == DistanceOrder.BIGGER_IS_BETTER
        ranked = sorted(zip(ids, scores.tolist(), strict=True), key=lambda h: h[1], reverse=reverse)
        return ranked[:limit]

    def _words_index(self, name: str, collection: Any) -> _LocalWords | None:
        """The collection's words inverted (`_LocalWords`), built once per state of the collection (a write
        drops it: the count of writes is kept with it)."""
        writes = self._fields.writes(name)
        known = self._words.get(name)
        if known is not None and known[0] == writes:
            return known[1]
        words = _LocalWords.build(collection)
        if words is not None and self._fields.writes(name) == writes:
            self._words[name] = (writes, words)
        return words

    async def _from_memory(
        self,
        name: str,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        tenant: str | None,
        lang: str | None,
    ) -> list[tuple[str, float, dict[str, Any]]] | None:
        """Local mode: the hits of the search without payloads, each with its MEMO_FIELDS from memory (what
        the engine returns for them); None if a hit is not in the table (cannot happen while this process is
        the folder's only writer)."""
        table = await self._memo_fields(name)
        ranked = self._local_dense(name, dense, limit) if lang is None and not (sparse and sparse.indices) else None
        if ranked is None:
            hits = await self.search(dense, sparse, limit, rrf_k, tenant=tenant, lang=lang, payload=False)
            ranked = [(h.id, h.score) for h in hits]
        out = []
        for i, score in ranked:
            known = table.get(i)
            if known is None:
                return None
            out.append((i, score, known[1]))
        return out

    def _in_memory(self, name: str) -> Any:
        """Local mode's collection `name` (qdrant-client's `LocalCollection`, its arrays and payloads), or
        None (a server, a collection local mode does not hold, or a qdrant-client whose local mode keeps them
        otherwise: these are its internals, not its API, so a release that renames them takes the public path;
        tests/test_edge_index.py fails if the installed one does)."""
        if not self._local:
            return None
        collections = getattr(getattr(self.client, "_client", None), "collections", None)
        collection = collections.get(name) if isinstance(collections, dict) else None
        if collection is None or not all(hasattr(collection, a) for a in _LOCAL_COLLECTION_PARTS):
            return None
        return collection

    def _local_dense(self, name: str, dense: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]] | None:
        """What local mode's `query_points(name, query=dense.tolist(), using=DENSE, limit=limit,
        with_payload=False)` finds, as (id, score), computed the way its `LocalCollection.search` computes it
        (its distance function, its mask of deleted points, its order) without the query's deep copy and the
        `ScoredPoint` it builds per hit: the retrieval pool is every chunk of a small shop (~120 hits a turn),
        0.6 ms a turn of building objects that are read for two fields. None when the collection is not
        in memory here (a server, or a name local mode does not hold)."""
        collection = self._in_memory(name)
        if collection is None or DENSE not in collection.vectors:
            return None
        distance = collection.get_vector_params(DENSE).distance
        # `query_points` makes its query list a float64 array (`np.array(list)`): the same scores to the bit.
        scores = calculate_distance(
            dense.astype(np.float64), collection.vectors[DENSE][: len(collection.payload)], distance
        )
        mask = collection._payload_and_non_deleted_mask(None, vector_name=DENSE)
        order = np.argsort(scores)
        if distance_to_order(distance) == DistanceOrder.BIGGER_IS_BETTER:
            order = order[::-1]
        order = order[mask[order] != 0][:limit]  # (the mask is 0/1 integers, not booleans)
        ids = collection.ids_inv
        return [(str(ids[i]), score) for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)]

    async def _memo_fields(self, name: str) -> Table:
        """Point id -> the id and its MEMO_FIELDS, for the collection `name` (read with a scroll the first time)."""
        found = self._fields.table(name)
        if found is None:
            writes = self._fields.writes(name)
            found = {}
            offset: Any = None
            while True:
                records, offset = await self.client.scroll(
                    name, limit=SCROLL_PAGE, offset=offset, with_payload=list(MEMO_FIELDS), with_vectors=False
                )
                found.update((str(r.id), (str(r.id), dict(r.payload or {}))) for r in records)
                if offset is None:
                    break
            self._fields.keep(name, writes, found)
        return found

    async def payloads(self, ids: Sequence[str], tenant: str | None = None) -> dict[str, dict[str, Any]]:
        name = await self._readable(tenant)
        if not ids or name is None:
            return {}
        collection = self._in_memory(name)
        if collection is not None:
            # What local mode's `retrieve` returns, read where it keeps it: its `retrieve` deep-copies every
            # payload, text and all (~0.2 ms for a turn's ~30 chunks), for callers that only read them.
            out: dict[str, dict[str, Any]] = {}
            for point_id in map(normalize_point_id, ids):
                idx = collection.ids.get(point_id)
                if idx is not None and not collection.deleted[idx]:
                    out[str(point_id)] = dict(collection.payload[idx])
            return out
        records = await self.client.retrieve(name, ids=list(ids), with_payload=True, with_vectors=False)
        return {str(r.id): dict(r.payload or {}) for r in records}

    async def stats(self, tenant: str | None = None) -> dict[str, int]:
        docs = await self.documents(tenant)
        return {"documents": len(docs), "chunks": sum(int(d["chunks"]) for d in docs.values())}

    async def documents(self, tenant: str | None = None) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        name = await self._readable(tenant)
        if name is None:
            return out
        offset: Any = None
        while True:
            records, offset = await self.client.scroll(
                name, limit=SCROLL_PAGE, offset=offset, with_payload=["doc_id", "source", "title"], with_vectors=False
            )
            for r in records:
                p = r.payload or {}
                entry = out.setdefault(
                    str(p.get("doc_id")), {"source": p.get("source"), "title": p.get("title"), "chunks": 0}
                )
                entry["chunks"] += 1
            if offset is None:
                return out

    async def tenants(self) -> list[str]:
        names = [c.name for c in (await self.client.get_collections()).collections]
        return sorted(t for t in (tenant_of(self.collection, n) for n in names) if t is not None)

    async def export(self, tenant: str | None, batch: int = 256) -> AsyncIterator[list[ChunkPoint]]:
        name = await self._readable(tenant)
        if name is None:
            return
        offset: Any = None
        while True:
            records, offset = await self.client.scroll(
                name, limit=batch, offset=offset, with_payload=True, with_vectors=True
            )
            points = []
            for r in records:
                vectors: Any = r.vector or {}
                sv = vectors.get(SPARSE)
                sparse = SparseVec(list(sv.indices), list(sv.values)) if sv is not None else SparseVec([], [])
                points.append(
                    ChunkPoint(str(r.id), np.asarray(vectors[DENSE], dtype=np.float32), sparse, dict(r.payload or {}))
                )
            if points:
                yield points
            if offset is None:
                return

    async def optimize(self) -> None:
        """A server builds its indexes in the background itself; local mode has none."""

    async def ping(self) -> None:
        await self.client.get_collections()

    def sibling(self, collection: str) -> QdrantIndex:
        if collection == self.collection:
            return self
        found = self._siblings.get(collection)
        if found is None:
            found = QdrantIndex(self.client, collection, self.dim, self._embedder_name)
            found._hnsw_ef, found._owns_client = self._hnsw_ef, False
            self._siblings[collection] = found
        return found

    async def close(self) -> None:
        if self._owns_client:
            await self.client.close()


def _doc_filter(doc_id: str) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))])


def open_client(settings: QdrantSettings) -> AsyncQdrantClient:
    if settings.url:
        return AsyncQdrantClient(url=settings.url, api_key=settings.api_key, timeout=int(settings.timeout_s))
    Path(settings.path).mkdir(parents=True, exist_ok=True)
    try:
        return AsyncQdrantClient(path=settings.path)
    except RuntimeError as exc:
        if "already accessed" in str(exc):
            raise IndexBusyError(
                f"the Qdrant folder {settings.path} is held by another process (probably a running rag-serve). "
                "Send the files to that server instead (rag-ingest --server http://HOST:PORT PATH...), stop it "
                "first, or run Qdrant as a server and set RAG_QDRANT__URL."
            ) from exc
        raise


def in_language(lang: str) -> models.Filter:
    """The filter to the chunks written in `lang`."""
    return models.Filter(must=[models.FieldCondition(key="lang", match=models.MatchValue(value=lang))])


class _LocalWords:
    """Local mode's word (sparse) search of one collection, from an inverted index of its stored sparse vectors:
    the same ids in the same order as its `query_points(query=SparseVector, using=SPARSE, query_filter=…)`
    (`LocalCollection.search`: the query's values times their IDF over the live points, each point's dot product
    summed in the query's index order in double precision and rounded to float32, points sharing no word left
    out, `np.argsort` of all the scores reversed, then the filter's mask), without a Python loop over every
    point's vector per search (~10 ms on a few hundred chunks). Built from qdrant-client's internals
    (`_LOCAL_WORDS_PARTS`); None when they are not there, and the caller takes the public path."""

    def __init__(self, collection: Any, postings: dict[int, tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]]):
        self.collection, self.postings = collection, postings
        self.size = len(collection.payload)
        self.live = int(np.count_nonzero(collection._payload_and_non_deleted_mask(None, vector_name=SPARSE)))
        self._masks: dict[str, Any] = {}

    @classmethod
    def build(cls, collection: Any) -> _LocalWords | None:
        if not all(hasattr(collection, a) for a in _LOCAL_WORDS_PARTS) or SPARSE not in collection.sparse_vectors:
            return None
        modifier = collection.config.sparse_vectors[SPARSE].modifier
        if modifier not in (None, models.Modifier.IDF, models.Modifier.NONE):
            return None
        rows: dict[int, tuple[list[int], list[float]]] = {}
        for row, vector in enumerate(collection.sparse_vectors[SPARSE][: len(collection.payload)]):
            for index, value in zip(vector.indices, vector.values, strict=True):
                found = rows.setdefault(int(index), ([], []))
                found[0].append(row)
                found[1].append(float(value))
        postings = {i: (np.asarray(r, dtype=np.intp), np.asarray(v, dtype=np.float64)) for i, (r, v) in rows.items()}
        return cls(collection, postings)

    def search(self, sparse: SparseVec, query_filter: models.Filter, limit: int) -> list[str] | None:
        if list(sparse.indices) != sorted(sparse.indices):
            return None
        collection = self.collection
        values = list(sparse.values)
        if collection.config.sparse_vectors[SPARSE].modifier == models.Modifier.IDF:
            frequencies = collection.sparse_vectors_idf.get(SPARSE)
            if frequencies is not None:
                values = [
                    value * math.log((self.live - frequencies.get(i, 0) + 0.5) / (frequencies.get(i, 0) + 0.5) + 1)
                    for i, value in zip(sparse.indices, values, strict=True)
                ]
        sums = np.zeros(self.size, dtype=np.float64)
        shared = np.zeros(self.size, dtype=bool)
        for index, value in zip(sparse.indices, values, strict=True):
            posting = self.postings.get(int(index))
            if posting is None:
                continue
            sums[posting[0]] += value * posting[1]
            shared[posting[0]] = True
        scores = np.where(shared, sums, -np.inf).astype(np.float32)
        key = query_filter.model_dump_json()
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = collection._payload_and_non_deleted_mask(query_filter, vector_name=SPARSE)
        out: list[str] = []
        for row in np.argsort(scores)[::-1].tolist():
            if len(out) >= limit:
                break
            if mask[row] and scores[row] != -np.inf:
                out.append(str(collection.ids_inv[row]))
        return out
