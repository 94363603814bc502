"""Tenant isolation in the index: one collection with a `tenant` payload filter vs a collection per tenant.

    .venv/bin/python bench/tenant_index.py                       # local mode (the default deployment)
    .venv/bin/python bench/tenant_index.py --url http://127.0.0.1:6333   # a Qdrant server, if you have one

For each (points in all, tenants) shape it builds both layouts in a temporary Qdrant (random unit
vectors of the embedder's 384 dimensions; every tenant the same size) and times the search the service
runs per turn: dense, top 20, with payload. Layout A is one collection and a `must tenant == X` filter
(with a keyword payload index on `tenant`, `is_tenant=True`, which a server uses and local mode
ignores); layout B has one collection per tenant and no filter. Reports the median and p95 over
`--queries` searches per layout, spread over the tenants, interleaved so both see the same machine load.
Writes bench/results/tenant_index.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

ROOT = Path(__file__).resolve().parent.parent
DIM = 384
BATCH = 512


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _create(client: QdrantClient, name: str, local: bool) -> None:
    client.create_collection(name, vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE))
    if not local:
        client.create_payload_index(
            name, "tenant", models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        )


def _fill(client: QdrantClient, name: str, vectors: np.ndarray[Any, Any], tenant: str, start: int) -> None:
    for i in range(0, len(vectors), BATCH):
        block = vectors[i : i + BATCH]
        client.upsert(
            name,
            points=[
                models.PointStruct(
                    id=start + i + j, vector=v.tolist(), payload={"tenant": tenant, "text": "x" * 200, "doc_id": "d"}
                )
                for j, v in enumerate(block)
            ],
            wait=True,
        )


def measure(client: QdrantClient, local: bool, points: int, tenants: int, queries: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    per = points // tenants
    shared = f"bench_shared_{points}_{tenants}"
    _create(client, shared, local)
    for t in range(tenants):
        vectors = _vectors(rng, per)
        _fill(client, shared, vectors, f"t{t}", t * per)
        _create(client, f"bench_t{t}_{points}_{tenants}", local)
        _fill(client, f"bench_t{t}_{points}_{tenants}", vectors, f"t{t}", 0)
    probes = _vectors(rng, queries)
    filtered: list[float] = []
    separate: list[float] = []
    for i, q in enumerate(probes):
        tenant = f"t{i % tenants}"
        flt = models.Filter(must=[models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))])
        t0 = time.perf_counter()
        a = client.query_points(shared, query=q.tolist(), query_filter=flt, limit=20, with_payload=True).points
        filtered.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = client.query_points(f"bench_{tenant}_{points}_{tenants}", query=q.tolist(), limit=20, with_payload=True)
        separate.append(time.perf_counter() - t0)
        # Same vectors either way: both layouts must find the same neighbours (exact search in local mode).
        if local:
            assert [p.payload["tenant"] for p in a] == [tenant] * len(a)
            assert len(a) == len(b.points)
    for name in [shared] + [f"bench_t{t}_{points}_{tenants}" for t in range(tenants)]:
        client.delete_collection(name)

    def stats(xs: list[float]) -> dict[str, float]:
        xs = sorted(xs)
        return {"p50_ms": round(statistics.median(xs) * 1000, 3), "p95_ms": round(xs[int(0.95 * len(xs))] * 1000, 3)}

    return {
        "points": points,
        "tenants": tenants,
        "points_per_tenant": per,
        "payload_filter": stats(filtered),
        "collection_per_tenant": stats(separate),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a Qdrant server; default: local mode in a temporary folder")
    ap.add_argument("--shapes", default="2000x1,2000x10,20000x1,20000x10,20000x100", help="POINTSxTENANTS,...")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tenant_index.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        client = QdrantClient(url=args.url) if args.url else QdrantClient(path=tmp)
        local = not args.url
        rows = []
        for shape in args.shapes.split(","):
            points, tenants = (int(x) for x in shape.split("x"))
            row = measure(client, local, points, tenants, args.queries, seed=points + tenants)
            print(json.dumps(row), flush=True)
            rows.append(row)
        client.close()
    result = {"qdrant": args.url or "local mode", "queries": args.queries, "dim": DIM, "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
