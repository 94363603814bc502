"""The embedded default: Qdrant Edge, Qdrant's own engine in-process, one shard per tenant.

A shard is a folder `{qdrant.path}/shards/{collection}` (`{collection}__tenant_{name}` for a tenant's) in a
Qdrant server's segment format, with HNSW for dense vectors, an inverted index for the BM25 vectors and
keyword payload indexes. One process owns a shard (its write-ahead log is locked): a second opener gets
IndexBusyError, and `rag-ingest` then sends its files to the running server, as it did with local mode.

Index building stays off the serving path. qdrant-edge 0.9 holds the GIL inside every call, so an HNSW
build in a worker thread would still stop the event loop for its whole length (seconds to minutes):
`optimize()` is only ever called by `rag-ingest` (after a run, when it owns the shard) and by `rag-ingest
--optimize`. Points added by the service's upload route stay in the shard's appendable segment, searched
exhaustively (exact, and fast at upload sizes), until the next `rag-ingest` run indexes them. Writes and
reads run in a worker thread in batches of `ingest.upsert_batch`, which bounds how long one call holds the
GIL (bench/vector_store.py measures it).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import numpy as np
import numpy.typing as npt
import qdrant_edge as qe

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

T = TypeVar("T")
# Next to each shard's segments: what the shard was built with (Edge keeps no collection metadata).
META_FILE = "rag-index.json"
SCROLL_PAGE = 2048


class EdgeIndex(VectorIndex):
    def __init__(
        self, settings: QdrantSettings, dim: int, embedder_name: str, *, beside_local_mode: bool = False
    ) -> None:
        self.dim, self.collection = dim, settings.collection
        self._settings, self._embedder_name = settings, embedder_name
        self._root = Path(settings.path) / "shards"
        self._shards: dict[str, qe.EdgeShard] = {}
        self._open_lock = threading.Lock()
        # Each shard's MEMO_FIELDS per point (this process is the shard's only writer: its write-ahead log is
        # locked): the retrieval pool's language reads, ~3 million instructions a turn from the payloads.
        self._fields = FieldsMemo()
        self._siblings: dict[str, EdgeIndex] = {}
        if not beside_local_mode:
            _refuse_local_mode_folder(Path(settings.path), self._root)
        self._root.mkdir(parents=True, exist_ok=True)
        # Opened now, not on first use: a folder held by a running server must say so before anything
        # else (the CLI falls back to that server before it loads a model).
        self._shard(self.collection, create=True)

    # ------------------------------------------------------------------ shards

    def _config(self) -> qe.EdgeConfig:
        s = self._settings
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            hnsw_config=qe.HnswIndexConfig(m=s.hnsw_m, ef_construct=s.hnsw_ef_construct, full_scan_threshold=10_000),
            # In the page cache, not read from disk per hit: a retrieval pool of 200 reads each hit's `lang`
            # (7.8 ms cold against 0.8 ms cached for 5,000 chunks, measured here).
            payload_memory=qe.Memory.Cached,
        )

    def _shard(self, name: str, *, create: bool) -> qe.EdgeShard | None:
        with self._open_lock:
            shard = self._shards.get(name)
            if shard is not None:
                return shard
            path = self._root / name
            exists = (path / META_FILE).exists()
            if not exists and not create:
                return None
            if exists:
                self._check_meta(path)
            try:
                if exists:
                    shard = qe.EdgeShard.load(str(path), self._config())
                else:
                    shard = qe.EdgeShard.create(str(path), self._config())
                    for field in INDEXED_FIELDS:
                        shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
                    (path / META_FILE).write_text(json.dumps({"embedder": self._embedder_name, "dim": self.dim}))
            except Exception as exc:  # qdrant-edge raises plain Exception with the engine's message
                raise _translate(exc, path, self._embedder_name, self.dim) from exc
            self._shards[name] = shard
            return shard

    def _check_meta(self, path: Path) -> None:
        meta = json.loads((path / META_FILE).read_text())
        if meta.get("dim") != self.dim or meta.get("embedder") != self._embedder_name:
            raise IndexSchemaError(
                f"shard {path} was built with {meta.get('embedder')} ({meta.get('dim')} dimensions), not "
                f"{self._embedder_name} ({self.dim}); use another qdrant.collection or qdrant.path, or re-create it"
            )

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def _absent(self, tenant: str | None) -> bool:
        """No shard for the tenant, open or on disk: known without a worker thread (a dictionary look-up
        and a stat). The FAQ collection of a shop without FAQ entries is searched every turn."""
        name = collection_for(self.collection, tenant)
        return name not in self._shards and not (self._root / name / META_FILE).exists()

    def _readable(self, tenant: str | None) -> qe.EdgeShard | None:
        return self._shard(collection_for(self.collection, tenant), create=False)

    def _writable(self, tenant: str | None) -> qe.EdgeShard:
        shard = self._shard(collection_for(self.collection, tenant), create=True)
        assert shard is not None
        return shard

    # ------------------------------------------------------------------ writes

    async def upsert(self, points: Sequence[ChunkPoint], tenant: str | None = None) -> None:
        if points:
            await self._run(self._upsert, points, tenant)

    def _upsert(self, points: Sequence[ChunkPoint], tenant: str | None) -> None:
        shard = self._writable(tenant)
        batch = [
            qe.Point(
                p.id, {DENSE: p.dense.tolist(), SPARSE: qe.SparseVector(p.sparse.indices, p.sparse.values)}, p.payload
            )
            for p in points
        ]
        with self._writing(tenant):
            shard.update(qe.UpdateOperation.upsert_points(batch))

    async def delete_ids(self, ids: Iterable[str], tenant: str | None = None) -> None:
        batch = list(ids)
        if batch:
            await self._run(self._delete_ids, batch, tenant)

    def _delete_ids(self, ids: list[str], tenant: str | None) -> None:
        shard = self._readable(tenant)
        if shard is not None:
            with self._writing(tenant):
                shard.update(qe.UpdateOperation.delete_points(list[Any](ids)))

    async def delete_doc(self, doc_id: str, tenant: str | None = None) -> int:
        return await self._run(self._delete_doc, doc_id, tenant)

    def _delete_doc(self, doc_id: str, tenant: str | None) -> int:
        shard = self._readable(tenant)
        if shard is None:
            return 0
        n = shard.count(qe.CountRequest(exact=True, filter=_doc_filter(doc_id)))
        if n:
            with self._writing(tenant):
                shard.update(qe.UpdateOperation.delete_points_by_filter(_doc_filter(doc_id)))
        return n

    def _writing(self, tenant: str | None) -> AbstractContextManager[None]:
        return self._fields.writing(collection_for(self.collection, tenant))

    async def optimize(self) -> None:
        await self._run(self._optimize)

    def _optimize(self) -> None:
        # Only this index's shards: a sibling's (the FAQ entries) are open in the sibling.
        for name in self._names():
            if tenant_of(self.collection, name) is None:
                continue
            shard = self._shard(name, create=False)
            if shard is not None:
                shard.optimize()
                shard.flush()

    # ------------------------------------------------------------------ reads

    def writes(self, tenant: str | None = None) -> int | None:
        return self._fields.writes(collection_for(self.collection, tenant))

    async def doc_point_ids(self, doc_id: str, tenant: str | None = None) -> set[str]:
        records = await self._run(self._scroll, tenant, _doc_filter(doc_id), False)
        return {str(r.id) for r in records}

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
        if self._absent(tenant):
            return []
        return await self._run(self._search, dense, sparse, limit, rrf_k, tenant, lang, payload)

    def _search(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        tenant: str | None,
        lang: str | None,
        payload: bool | list[str],
    ) -> list[ScoredChunk]:
        shard = self._readable(tenant)
        if shard is None:
            return []
        if memo_only(payload):
            found = self._from_memory(dense, sparse, limit, rrf_k, tenant, lang, shard)
            if found is not None:
                return [ScoredChunk(i, score, pick(known, payload)) for i, score, known in found]
        request = self._request(dense, sparse, limit, rrf_k, lang, payload)
        return [ScoredChunk(str(h.id), float(h.score), dict(h.payload or {})) for h in shard.query(request)]

    async def pool(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        *,
        tenant: str | None = None,
    ) -> list[tuple[str, float, str]]:
        """As `VectorIndex.pool`, without a `ScoredChunk` made per hit (~120 a turn) on the way."""
        if self._absent(tenant):
            return []
        return await self._run(self._pool, dense, sparse, limit, rrf_k, tenant)

    def _pool(
        self, dense: npt.NDArray[np.float32], sparse: SparseVec | None, limit: int, rrf_k: int, tenant: str | None
    ) -> list[tuple[str, float, str]]:
        shard = self._readable(tenant)
        if shard is None:
            return []
        found = self._from_memory(dense, sparse, limit, rrf_k, tenant, None, shard)
        if found is not None:
            return [(i, score, str(known.get("lang", ""))) for i, score, known in found]
        hits = self._search(dense, sparse, limit, rrf_k, tenant, None, ["lang"])
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
        if self._absent(tenant) or not sparse.indices:
            return []
        return await self._run(self._matching, dense, sparse, limit, within, lang, tenant)

    def _matching(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec,
        limit: int,
        within: int,
        lang: str,
        tenant: str | None,
    ) -> list[tuple[str, float]]:
        shard = self._readable(tenant)
        if shard is None:
            return []
        language = qe.Filter(must=[qe.FieldCondition(key="lang", match=qe.MatchValue(lang))])
        words = qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE)
        request = qe.QueryRequest(
            limit=limit,
            prefetches=[qe.Prefetch(limit=within, query=words, filter=language)],
            query=qe.Query.Nearest(dense.tolist(), using=DENSE),
            with_payload=False,
        )
        return [(str(h.id), float(h.score)) for h in shard.query(request)]

    def _from_memory(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        tenant: str | None,
        lang: str | None,
        shard: qe.EdgeShard,
    ) -> list[tuple[str, float, dict[str, Any]]] | None:
        """The hits of the search without payloads, each with its MEMO_FIELDS from memory (what the engine
        returns for them); None if a hit is not in the table (cannot happen while this process is the
        shard's only writer)."""
        table = self._memo_fields(collection_for(self.collection, tenant), shard)
        out = []
        for h in shard.query(self._request(dense, sparse, limit, rrf_k, lang, False)):
            found = table.get(_key(h.id))
            if found is None:
                return None
            out.append((found[0], float(h.score), found[1]))
        return out

    def _request(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        lang: str | None,
        payload: bool | list[str],
    ) -> qe.QueryRequest:
        params = qe.SearchParams(hnsw_ef=self._settings.hnsw_ef)
        nearest = qe.Query.Nearest(dense.tolist(), using=DENSE)
        if lang is not None:
            language = qe.Filter(must=[qe.FieldCondition(key="lang", match=qe.MatchValue(lang))])
            return qe.QueryRequest(limit=limit, query=nearest, filter=language, with_payload=payload, params=params)
        if sparse is None or not sparse.indices:
            return qe.QueryRequest(limit=limit, query=nearest, with_payload=payload, params=params)
        return qe.QueryRequest(
            limit=limit,
            prefetches=[
                qe.Prefetch(limit=limit, query=nearest, params=params),
                qe.Prefetch(
                    limit=limit,
                    query=qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE),
                ),
            ],
            # The stubs type the Fusion variants as their own classes; the engine takes them as queries.
            query=qe.Fusion.Rrf(k=rrf_k),  # type: ignore[arg-type]
            with_payload=payload,
        )

    def _memo_fields(self, name: str, shard: qe.EdgeShard) -> Table:
        """Point id (`_key`) -> the id as text and its MEMO_FIELDS, for the shard `name` (read with one
        scroll the first time)."""
        found = self._fields.table(name)
        if found is None:
            writes = self._fields.writes(name)
            records = self._scroll_shard(shard, None, list(MEMO_FIELDS))
            found = {_key(r.id): (str(r.id), dict(r.payload or {})) for r in records}
            self._fields.keep(name, writes, found)
        return found

    async def payloads(self, ids: Sequence[str], tenant: str | None = None) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        return await self._run(self._payloads, list(ids), tenant)

    def _payloads(self, ids: list[str], tenant: str | None) -> dict[str, dict[str, Any]]:
        shard = self._readable(tenant)
        if shard is None:
            return {}
        return {
            str(r.id): dict(r.payload or {})
            for r in shard.retrieve(list[Any](ids), with_payload=True, with_vector=False)
        }

    async def stats(self, tenant: str | None = None) -> dict[str, int]:
        docs = await self.documents(tenant)
        return {"documents": len(docs), "chunks": sum(int(d["chunks"]) for d in docs.values())}

    async def documents(self, tenant: str | None = None) -> dict[str, dict[str, Any]]:
        records = await self._run(self._scroll, tenant, None, ["doc_id", "source", "title"])
        out: dict[str, dict[str, Any]] = {}
        for r in records:
            p = r.payload or {}
            entry = out.setdefault(
                str(p.get("doc_id")), {"source": p.get("source"), "title": p.get("title"), "chunks": 0}
            )
            entry["chunks"] += 1
        return out

    def _scroll(self, tenant: str | None, where: qe.Filter | None, payload: bool | list[str]) -> list[qe.Record]:
        shard = self._readable(tenant)
        if shard is None:
            return []
        return self._scroll_shard(shard, where, payload)

    @staticmethod
    def _scroll_shard(shard: qe.EdgeShard, where: qe.Filter | None, payload: bool | list[str]) -> list[qe.Record]:
        out: list[qe.Record] = []
        offset: Any = None
        while True:
            records, offset = shard.scroll(
                qe.ScrollRequest(
                    offset=offset, limit=SCROLL_PAGE, filter=where, with_payload=payload, with_vector=False
                )
            )
            out.extend(records)
            if offset is None:
                return out

    async def tenants(self) -> list[str]:
        return [t for t in (tenant_of(self.collection, n) for n in self._names()) if t is not None]

    def _names(self) -> list[str]:
        return sorted(p.name for p in self._root.iterdir() if (p / META_FILE).exists())

    async def export(self, tenant: str | None, batch: int = 256) -> AsyncIterator[list[ChunkPoint]]:
        offset: Any = None
        while True:
            points, offset = await self._run(self._export_page, tenant, offset, batch)
            if points:
                yield points
            if offset is None:
                return

    def _export_page(self, tenant: str | None, offset: Any, batch: int) -> tuple[list[ChunkPoint], Any]:
        shard = self._readable(tenant)
        if shard is None:
            return [], None
        records, offset = shard.scroll(
            qe.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=True)
        )
        points = []
        for r in records:
            vectors: Any = r.vector or {}
            sv = vectors.get(SPARSE)
            sparse = SparseVec(list(sv.indices), list(sv.values)) if sv is not None else SparseVec([], [])
            points.append(
                ChunkPoint(str(r.id), np.asarray(vectors[DENSE], dtype=np.float32), sparse, dict(r.payload or {}))
            )
        return points, offset

    async def ping(self) -> None:
        await self._run(self._ping)

    def _ping(self) -> None:
        shard = self._shard(self.collection, create=False)
        if shard is None:
            raise IndexSchemaError(f"shard {self._root / self.collection} is gone")
        shard.info()

    def sibling(self, collection: str) -> EdgeIndex:
        if collection == self.collection:
            return self
        with self._open_lock:
            found = self._siblings.get(collection)
            if found is None:
                settings = self._settings.model_copy(update={"collection": collection})
                # This index already checked the folder is not a local-mode one.
                found = EdgeIndex(settings, self.dim, self._embedder_name, beside_local_mode=True)
                self._siblings[collection] = found
            return found

    async def close(self) -> None:
        for sibling in list(self._siblings.values()):
            await sibling.close()
        await self._run(self._close)

    def _close(self) -> None:
        with self._open_lock:
            for shard in self._shards.values():
                shard.flush()
                shard.close()
            self._shards.clear()


def _key(point_id: Any) -> int | str:
    """A point id as the fields table keys it: a UUID by its number (the engine hands each hit's id over as
    a `uuid.UUID`, whose text is built in Python: 0.5 µs a hit, ~120 hits a turn), any other id by its text
    (so an integer id cannot meet a UUID's number)."""
    return point_id.int if type(point_id) is UUID else str(point_id)


def check_free(settings: QdrantSettings) -> None:
    """Raises IndexBusyError when another process holds the default tenant's shard."""
    path = Path(settings.path) / "shards" / settings.collection
    if not (path / META_FILE).exists():
        return
    try:
        shard = qe.EdgeShard.load(str(path))
    except Exception as exc:
        raise _translate(exc, path, "", 0) from exc
    shard.close()


def _doc_filter(doc_id: str) -> qe.Filter:
    return qe.Filter(must=[qe.FieldCondition(key="doc_id", match=qe.MatchValue(doc_id))])


def _translate(exc: Exception, path: Path, embedder: str, dim: int) -> Exception:
    text = str(exc)
    if "WouldBlock" in text:  # the WAL's file lock, held by the owning process
        return IndexBusyError(
            f"the Qdrant Edge shard {path} is held by another process (probably a running rag-serve). "
            "Send the files to that server instead (rag-ingest --server http://HOST:PORT PATH...), stop it "
            "first, or run Qdrant as a server and set RAG_QDRANT__URL."
        )
    if "incompatible" in text.lower():
        return IndexSchemaError(f"shard {path} does not fit the embedder {embedder} ({dim} dimensions): {text}")
    return exc


def _refuse_local_mode_folder(folder: Path, shards: Path) -> None:
    """A folder that holds a local-mode index and no shards: starting empty would hide the knowledge base."""
    if (folder / "meta.json").exists() and (folder / "collection").is_dir() and not shards.exists():
        raise IndexSchemaError(
            f"{folder} holds a qdrant-client local-mode index, not Qdrant Edge shards: keep using it with "
            "qdrant.engine: local, or copy it into Edge shards beside it with "
            "`RAG_QDRANT__ENGINE=local rag-ingest --push edge`"
        )
