"""The chunk index in Qdrant: local mode on disk by default, a server when a URL is set.

Each point carries a dense vector ("dense") and a BM25-style sparse vector ("bm25", IDF applied by
Qdrant) plus the payload {tenant, doc_id, source, title, chunk_index, text, content_hash, token_count,
section, lang}.

Tenants are kept apart by collection: a search reads one tenant's collection and nothing else. Measured
against one shared collection with a `tenant` payload filter (bench/tenant_index.py, docs/tenancy.md):
local mode evaluates filters in Python, point by point, and a filtered search costs many times an
unfiltered one. The `tenant` payload field stays on every point, so a deployment that outgrows a
collection per tenant can move to payload partitioning on a server without re-embedding.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt
from qdrant_client import QdrantClient, models

from rag_core.lexical import SparseVec
from rag_core.settings import DEFAULT_TENANT, QdrantSettings

DENSE = "dense"
SPARSE = "bm25"
# Between the configured collection name and a tenant's name (tenant names are [A-Za-z0-9_.-]).
TENANT_INFIX = "__tenant_"


class IndexBusyError(RuntimeError):
    """Qdrant's local mode lets one process open a folder at a time."""


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


P = ParamSpec("P")
R = TypeVar("R")


def _guarded(method: Callable[Concatenate[VectorIndex, P], R]) -> Callable[Concatenate[VectorIndex, P], R]:
    @wraps(method)
    def wrapper(self: VectorIndex, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._guard:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class VectorIndex:
    """One collection per tenant: `collection` itself for the default tenant, so that an index built before
    documents had tenants is that tenant's, and `{collection}__tenant_{name}` for each other tenant, made on
    its first write. Every method takes the tenant; None is the default tenant.
    """

    def __init__(self, client: QdrantClient, collection: str, dim: int, embedder_name: str) -> None:
        self.client, self.collection, self.dim = client, collection, dim
        self._embedder_name = embedder_name
        # Local mode is plain Python over numpy arrays, not safe to search while another thread
        # upserts (the service ingests uploads while it answers); a server handles its own concurrency.
        self._guard: AbstractContextManager[object] = threading.Lock() if _is_local(client) else nullcontext()
        # Collections known to exist with the right schema; another worker may add more at any time.
        self._ready: set[str] = set()
        self._local = _is_local(client)
        # Local mode copies a point's whole payload to return any field of it, so a wide retrieval pool
        # asks for ids only and reads each point's language here: per collection, loaded on first use and
        # kept up to date on this process's writes.
        self._langs: dict[str, dict[str, str]] = {}
        self._ensure_collection(collection, create=True)

    @classmethod
    def open(cls, settings: QdrantSettings, dim: int, embedder_name: str) -> VectorIndex:
        return cls(open_client(settings), settings.collection, dim, embedder_name)

    def collection_for(self, tenant: str | None) -> str:
        if tenant is None or tenant == DEFAULT_TENANT:
            return self.collection
        return f"{self.collection}{TENANT_INFIX}{tenant}"

    def _writable(self, tenant: str | None) -> str:
        name = self.collection_for(tenant)
        if name not in self._ready:
            self._ensure_collection(name, create=True)
        return name

    def _readable(self, tenant: str | None) -> str | None:
        """The tenant's collection, or None when the tenant has never stored a document."""
        name = self.collection_for(tenant)
        if name in self._ready or self._ensure_collection(name, create=False):
            return name
        return None

    def _ensure_collection(self, name: str, *, create: bool) -> bool:
        if self.client.collection_exists(name):
            self._check_schema(name)
            self._ready.add(name)
            return True
        if not create:
            return False
        try:
            self.client.create_collection(
                name,
                vectors_config={DENSE: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                metadata={"embedder": self._embedder_name},
            )
        except Exception:
            # Another worker may have made it a moment ago; then it is there to be checked.
            if not self.client.collection_exists(name):
                raise
            return self._ensure_collection(name, create=False)
        # Local mode scans every point anyway and warns about payload indexes; servers need one.
        if not _is_local(self.client):
            self.client.create_payload_index(name, "doc_id", models.PayloadSchemaType.KEYWORD)
            self.client.create_payload_index(name, "lang", models.PayloadSchemaType.KEYWORD)
        self._ready.add(name)
        return True

    def _check_schema(self, name: str) -> None:
        info = self.client.get_collection(name)
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

    @_guarded
    def upsert(self, points: Sequence[ChunkPoint], tenant: str | None = None) -> None:
        if not points:
            return
        name = self._writable(tenant)
        if name in self._langs:
            self._langs[name].update((p.id, str(p.payload.get("lang", ""))) for p in points)
        self.client.upsert(
            name,
            points=[
                models.PointStruct(
                    id=p.id,
                    vector={
                        DENSE: p.dense.tolist(),
                        SPARSE: models.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                    },
                    payload=p.payload,
                )
                for p in points
            ],
            wait=True,
        )

    @_guarded
    def doc_point_ids(self, doc_id: str, tenant: str | None = None) -> set[str]:
        ids: set[str] = set()
        name = self._readable(tenant)
        if name is None:
            return ids
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                name,
                scroll_filter=_doc_filter(doc_id),
                limit=1024,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            ids.update(str(r.id) for r in records)
            if offset is None:
                return ids

    @_guarded
    def delete_ids(self, ids: Iterable[str], tenant: str | None = None) -> None:
        batch: list[models.ExtendedPointId] = list(ids)
        name = self._readable(tenant)
        for i in batch:
            self._langs.get(name or "", {}).pop(str(i), None)
        if batch and name is not None:
            self.client.delete(name, points_selector=models.PointIdsList(points=batch), wait=True)

    @_guarded
    def delete_doc(self, doc_id: str, tenant: str | None = None) -> int:
        name = self._readable(tenant)
        if name is None:
            return 0
        self._langs.pop(name, None)  # reloaded on next use
        n = self.client.count(name, count_filter=_doc_filter(doc_id), exact=True).count
        if n:
            self.client.delete(name, points_selector=models.FilterSelector(filter=_doc_filter(doc_id)))
        return n

    @_guarded
    def search(
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
        """The nearest chunks among `tenant`'s documents; `lang` keeps only chunks of that language (dense
        only); `payload` names the payload fields to return (all by default)."""
        name = self._readable(tenant)
        if name is None:
            return []
        if lang is not None:
            hits = self.client.query_points(
                name,
                query=dense.tolist(),
                using=DENSE,
                limit=limit,
                with_payload=payload,
                query_filter=models.Filter(
                    must=[models.FieldCondition(key="lang", match=models.MatchValue(value=lang))]
                ),
            ).points
        elif sparse is None or not sparse.indices:
            hits = self.client.query_points(
                name, query=dense.tolist(), using=DENSE, limit=limit, with_payload=payload
            ).points
        else:
            hits = self.client.query_points(
                name,
                prefetch=[
                    models.Prefetch(query=dense.tolist(), using=DENSE, limit=limit),
                    models.Prefetch(
                        query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                        using=SPARSE,
                        limit=limit,
                    ),
                ],
                query=models.RrfQuery(rrf=models.Rrf(k=rrf_k)),
                limit=limit,
                with_payload=payload,
            ).points
        return [ScoredChunk(str(h.id), float(h.score), dict(h.payload or {})) for h in hits]

    def pool(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        *,
        tenant: str | None = None,
    ) -> list[tuple[str, float, str]]:
        """(id, score, language) of `tenant`'s top `limit` chunks, without their payloads."""
        if not self._local:
            hits = self.search(dense, sparse, limit, rrf_k, tenant=tenant, payload=["lang"])
            return [(h.id, h.score, str(h.payload.get("lang", ""))) for h in hits]
        hits = self.search(dense, sparse, limit, rrf_k, tenant=tenant, payload=False)
        name = self._readable(tenant)
        if name is None:
            return []
        with self._guard:
            if name not in self._langs:
                self._langs[name] = self._load_languages(name)
            langs = self._langs[name]
            return [(h.id, h.score, langs.get(h.id, "")) for h in hits]

    def _load_languages(self, name: str) -> dict[str, str]:
        langs: dict[str, str] = {}
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                name, limit=2048, offset=offset, with_payload=["lang"], with_vectors=False
            )
            langs.update((str(r.id), str((r.payload or {}).get("lang", ""))) for r in records)
            if offset is None:
                return langs

    @_guarded
    def payloads(self, ids: Sequence[str], tenant: str | None = None) -> dict[str, dict[str, Any]]:
        """Full payloads of the given points of `tenant`'s collection."""
        name = self._readable(tenant)
        if not ids or name is None:
            return {}
        records = self.client.retrieve(name, ids=list(ids), with_payload=True, with_vectors=False)
        return {str(r.id): dict(r.payload or {}) for r in records}

    @_guarded
    def stats(self, tenant: str | None = None) -> dict[str, int]:
        name = self._readable(tenant)
        if name is None:
            return {"documents": 0, "chunks": 0}
        chunks = self.client.count(name, exact=True).count
        docs: set[str] = set()
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                name, limit=2048, offset=offset, with_payload=["doc_id"], with_vectors=False
            )
            docs.update(str((r.payload or {}).get("doc_id")) for r in records)
            if offset is None:
                break
        return {"documents": len(docs), "chunks": chunks}

    @_guarded
    def documents(self, tenant: str | None = None) -> dict[str, dict[str, Any]]:
        """doc_id -> {source, title, chunks}, for `tenant`'s documents."""
        out: dict[str, dict[str, Any]] = {}
        name = self._readable(tenant)
        if name is None:
            return out
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                name,
                limit=2048,
                offset=offset,
                with_payload=["doc_id", "source", "title"],
                with_vectors=False,
            )
            for r in records:
                p = r.payload or {}
                entry = out.setdefault(
                    str(p.get("doc_id")), {"source": p.get("source"), "title": p.get("title"), "chunks": 0}
                )
                entry["chunks"] += 1
            if offset is None:
                return out

    def ping(self) -> None:
        self.client.get_collection(self.collection)

    def close(self) -> None:
        self.client.close()


def _doc_filter(doc_id: str) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))])


def _is_local(client: QdrantClient) -> bool:
    return type(client._client).__name__ == "QdrantLocal"


def open_client(settings: QdrantSettings) -> QdrantClient:
    if settings.url:
        return QdrantClient(url=settings.url, api_key=settings.api_key, timeout=int(settings.timeout_s))
    Path(settings.path).mkdir(parents=True, exist_ok=True)
    try:
        return QdrantClient(path=settings.path)
    except RuntimeError as exc:
        if "already accessed" in str(exc):
            raise IndexBusyError(
                f"the Qdrant folder {settings.path} is held by another process (probably a running rag-serve). "
                "Send the files to that server instead (rag-ingest --server http://HOST:PORT PATH...), stop it "
                "first, or run Qdrant as a server and set RAG_QDRANT__URL."
            ) from exc
        raise
