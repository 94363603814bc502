"""A content-addressed, append-only embedding cache on disk.

Keys are sha256(embedder name, kind, text); vectors live in shards (`<key-dir>/shard-NNNNN.npy` plus a
`.json` list of keys, written after the vectors, so an interrupted run keeps every finished shard and a
half-written shard is ignored). A second run over the same corpus embeds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rag_core.embedding import Embedder

Matrix = npt.NDArray[np.float32]


def cache_key(embedder_name: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{embedder_name}\x00{kind}\x00{text}".encode()).hexdigest()


class EmbeddingCache:
    def __init__(self, root: Path, embedder_name: str, dim: int) -> None:
        self.name, self.dim = embedder_name, dim
        self.dir = Path(root) / re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_name)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._rows: dict[str, npt.NDArray[np.float32]] = {}
        self._shards = 0
        for meta in sorted(self.dir.glob("shard-*.json")):
            vectors = meta.with_suffix(".npy")
            if not vectors.exists():
                continue
            keys: list[str] = json.loads(meta.read_text())
            matrix = np.load(vectors)
            if matrix.shape != (len(keys), dim):
                continue
            self._rows.update(zip(keys, matrix, strict=True))
            self._shards += 1

    def __len__(self) -> int:
        return len(self._rows)

    def embed(
        self,
        texts: Sequence[str],
        kind: str,
        compute: Callable[[list[str]], Matrix],
        batch: int = 64,
        progress: Callable[[int, int], None] | None = None,
    ) -> Matrix:
        """Vectors for `texts` in order; only the missing ones go to `compute`, `batch` at a time."""
        keys = [cache_key(self.name, kind, t) for t in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._rows:
                missing.setdefault(key, text)
        todo = list(missing.items())
        for start in range(0, len(todo), batch):
            part = todo[start : start + batch]
            vectors = np.asarray(compute([t for _, t in part]), dtype=np.float32).reshape(len(part), self.dim)
            self._save([k for k, _ in part], vectors)
            if progress:
                progress(min(start + batch, len(todo)), len(todo))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[k] for k in keys]).astype(np.float32)

    def _save(self, keys: list[str], vectors: Matrix) -> None:
        stem = self.dir / f"shard-{self._shards:05d}-{os.getpid()}"
        tmp = stem.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        os.replace(tmp, stem.with_suffix(".npy"))
        stem.with_suffix(".json").write_text(json.dumps(keys))
        self._shards += 1
        self._rows.update(zip(keys, vectors, strict=True))


class CachingEmbedder:
    """An `Embedder` whose passages and queries go through an `EmbeddingCache`."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner, self.cache = inner, cache
        self.name, self.dim, self.remote = inner.name, inner.dim, inner.remote

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        vectors = self.cache.embed([text], "query", lambda ts: np.stack([self.inner.embed_query(t) for t in ts]))
        return np.asarray(vectors[0], dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self.cache.embed(texts, "passage", self.inner.embed_passages)
