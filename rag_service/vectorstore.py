"""The chunk index in Qdrant: local mode on disk by default, a server when a URL is set.

Each point carries a dense vector ("dense") and a BM25-style sparse vector ("bm25", IDF applied by
Qdrant) plus the payload {doc_id, source, title, chunk_index, text, content_hash, token_count}.
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

from rag_service.lexical import SparseVec
from rag_service.settings import QdrantSettings

DENSE = "dense"
SPARSE = "bm25"


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
    def __init__(self, client: QdrantClient, collection: str, dim: int, embedder_name: str) -> None:
        self.client, self.collection, self.dim = client, collection, dim
        # Local mode is plain Python over numpy arrays, not safe to search while another thread
        # upserts (the service ingests uploads while it answers); a server handles its own concurrency.
        self._guard: AbstractContextManager[object] = threading.Lock() if _is_local(client) else nullcontext()
        self._local = _is_local(client)
        # Local mode copies a point's whole payload to return any field of it, so a wide retrieval pool
        # asks for ids only and reads each point's language here (loaded once, kept up to date on writes).
        self._langs: dict[str, str] | None = None
        self._ensure_collection(embedder_name)

    @classmethod
    def open(cls, settings: QdrantSettings, dim: int, embedder_name: str) -> VectorIndex:
        return cls(open_client(settings), settings.collection, dim, embedder_name)

    def _ensure_collection(self, embedder_name: str) -> None:
        if self.client.collection_exists(self.collection):
            info = self.client.get_collection(self.collection)
            vectors = info.config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
            if size != self.dim:
                raise IndexSchemaError(
                    f"collection {self.collection!r} holds {size}-dimensional vectors but the embedder "
                    f"{embedder_name} makes {self.dim}; use another qdrant.collection or re-create it"
                )
            stored = (info.config.metadata or {}).get("embedder")
            if stored and stored != embedder_name:
                raise IndexSchemaError(
                    f"collection {self.collection!r} was built with {stored}, not {embedder_name}; "
                    "use another qdrant.collection or re-create it"
                )
            return
        self.client.create_collection(
            self.collection,
            vectors_config={DENSE: models.VectorParams(size=self.dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            metadata={"embedder": embedder_name},
        )
        # Local mode scans every point anyway and warns about payload indexes; servers need one.
        if not _is_local(self.client):
            self.client.create_payload_index(self.collection, "doc_id", models.PayloadSchemaType.KEYWORD)
            self.client.create_payload_index(self.collection, "lang", models.PayloadSchemaType.KEYWORD)

    @_guarded
    def upsert(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        if self._langs is not None:
            self._langs.update((p.id, str(p.payload.get("lang", ""))) for p in points)
        self.client.upsert(
            self.collection,
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
    def doc_point_ids(self, doc_id: str) -> set[str]:
        ids: set[str] = set()
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
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
    def delete_ids(self, ids: Iterable[str]) -> None:
        batch: list[models.ExtendedPointId] = list(ids)
        if self._langs is not None:
            for i in batch:
                self._langs.pop(str(i), None)
        if batch:
            self.client.delete(self.collection, points_selector=models.PointIdsList(points=batch), wait=True)

    @_guarded
    def delete_doc(self, doc_id: str) -> int:
        self._langs = None  # reloaded on next use
        n = self.client.count(self.collection, count_filter=_doc_filter(doc_id), exact=True).count
        if n:
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=_doc_filter(doc_id)))
        return n

    @_guarded
    def search(
        self,
        dense: npt.NDArray[np.float32],
        sparse: SparseVec | None,
        limit: int,
        rrf_k: int,
        *,
        lang: str | None = None,
        payload: bool | list[str] = True,
    ) -> list[ScoredChunk]:
        """Top `limit` chunks; `lang` keeps only chunks of that language (dense only); `payload` names the
        payload fields to return (all by default; copying whole payloads is most of a local search)."""
        if lang is not None:
            hits = self.client.query_points(
                self.collection,
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
                self.collection, query=dense.tolist(), using=DENSE, limit=limit, with_payload=payload
            ).points
        else:
            hits = self.client.query_points(
                self.collection,
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
        self, dense: npt.NDArray[np.float32], sparse: SparseVec | None, limit: int, rrf_k: int
    ) -> list[tuple[str, float, str]]:
        """(id, score, language) of the top `limit` chunks, without their payloads."""
        if not self._local:
            return [
                (h.id, h.score, str(h.payload.get("lang", "")))
                for h in self.search(dense, sparse, limit, rrf_k, payload=["lang"])
            ]
        hits = self.search(dense, sparse, limit, rrf_k, payload=False)
        with self._guard:
            if self._langs is None:
                self._langs = self._load_languages()
            return [(h.id, h.score, self._langs.get(h.id, "")) for h in hits]

    def _load_languages(self) -> dict[str, str]:
        langs: dict[str, str] = {}
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection, limit=2048, offset=offset, with_payload=["lang"], with_vectors=False
            )
            langs.update((str(r.id), str((r.payload or {}).get("lang", ""))) for r in records)
            if offset is None:
                return langs

    @_guarded
    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Full payloads of the given points."""
        if not ids:
            return {}
        records = self.client.retrieve(self.collection, ids=list(ids), with_payload=True, with_vectors=False)
        return {str(r.id): dict(r.payload or {}) for r in records}

    @_guarded
    def stats(self) -> dict[str, int]:
        chunks = self.client.count(self.collection, exact=True).count
        docs: set[str] = set()
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection, limit=2048, offset=offset, with_payload=["doc_id"], with_vectors=False
            )
            docs.update(str((r.payload or {}).get("doc_id")) for r in records)
            if offset is None:
                break
        return {"documents": len(docs), "chunks": chunks}

    @_guarded
    def documents(self) -> dict[str, dict[str, Any]]:
        """doc_id -> {source, title, chunks}."""
        out: dict[str, dict[str, Any]] = {}
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
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
