"""Latency of one query embedding with the in-process embedder, as the service makes it.

The embedder's OpenMP threads wait at a barrier in every parallel region of a query; how long they spin there
(`GOMP_SPINCOUNT`, `OMP_WAIT_POLICY`) decides both the idle latency and what a busy host does to it. Each
setting is a fresh process (libgomp reads its environment once), built through `make_embedder`, so the
service's own default applies unless the variable is given:

    .venv/bin/python bench/embed_latency.py                          # the service's default
    GOMP_SPINCOUNT=300000 .venv/bin/python bench/embed_latency.py    # libgomp's own default
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/embed_latency.py
    (yes >/dev/null & yes >/dev/null & .venv/bin/python bench/embed_latency.py; kill %1 %2)   # a busy host

Prints the minimum and median milliseconds per question over `--rounds` rounds (interleaved).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rag_core.embedding import make_embedder  # noqa: E402
from rag_core.settings import EmbeddingSettings  # noqa: E402

QUESTIONS = (
    "这款电水壶的保温功能能维持多长时间？",
    "How long does delivery to a rural address usually take?",
    "周末门店营业到几点？",
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60)
    args = p.parse_args(argv)
    embedder = make_embedder(EmbeddingSettings(query_cache_size=0))
    for q in QUESTIONS:
        embedder.embed_query(q)
    times: dict[str, list[float]] = {q: [] for q in QUESTIONS}
    for _ in range(args.rounds):
        for q in QUESTIONS:
            start = time.perf_counter()
            embedder.embed_query(q)
            times[q].append((time.perf_counter() - start) * 1000)
    env = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS") if k in os.environ}
    print(f"# {env}, {args.rounds} rounds; ms per query: min / median")
    for q in QUESTIONS:
        print(f"{min(times[q]):6.2f} / {statistics.median(times[q]):6.2f}  {q}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
