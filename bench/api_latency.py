"""Per-turn latency of the HTTP service under concurrency, against the project's own OpenAI-compatible
upstream (tests/fake_llm.py).

    .venv/bin/python bench/api_latency.py --concurrency 1,10,100 --turns 10
    .venv/bin/python bench/api_latency.py --redis redis://127.0.0.1:6379/15 \
        --database postgresql+asyncpg://postgres@127.0.0.1:5432/test --concurrency 100

Starts the fake upstream (zero delay) and `rag-serve` as subprocesses on free ports, ingests
examples/kb into a temporary Qdrant folder first, then runs N concurrent sessions of T turns each
(Chinese and English follow-ups). Overhead = turn wall time minus the upstream's own service time,
which is measured by the same client calling the upstream directly. Then time to first streamed
byte with an upstream that waits 300 ms before its first token. With --redis, also Redis commands
per turn (INFO commandstats before/after). Writes bench/results/api_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kb_questions import FOLLOWUPS, QUESTIONS  # noqa: E402

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def conversation(i: int, turns: int) -> list[str]:
    """Turn 1 a standalone question, then follow-ups, cycling through the question data."""
    convo = list(FOLLOWUPS[i % len(FOLLOWUPS)][0])
    j = i
    while len(convo) < turns:
        convo.append(QUESTIONS[j % len(QUESTIONS)][0])
        j += 7
    return convo[:turns]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def upstream_floor(base: str, n: int = 50) -> float:
    """Median time of a bare chat call to the upstream: what a turn spends inside the LLM."""
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=base, timeout=30) as c:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            (await c.post("/chat/completions", json=body)).raise_for_status()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


async def run_load(base: str, sessions: int, turns: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=sessions + 4, max_keepalive_connections=sessions + 4)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:

        async def one(i: int) -> list[float]:
            sid = (await client.post("/v1/sessions")).json()["session_id"]
            out = []
            for q in conversation(i, turns):
                t = time.perf_counter()
                resp = await client.post(f"/v1/sessions/{sid}/chat", json={"question": q})
                resp.raise_for_status()
                out.append(time.perf_counter() - t)
            return out

        start = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(sessions)))
        wall = time.perf_counter() - start
    latencies = [x for r in results for x in r]
    return {"latencies": latencies, "wall_s": wall, "turns": len(latencies)}


async def ttfb(base: str, n: int) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for i in range(n):
            sid = (await client.post("/v1/sessions")).json()["session_id"]
            t = time.perf_counter()
            async with client.stream(
                "POST", f"/v1/sessions/{sid}/chat", json={"question": QUESTIONS[i % len(QUESTIONS)][0], "stream": True}
            ) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("event: delta"):
                        out.append(time.perf_counter() - t)
                        break
    return out


def redis_commands(url: str) -> int:
    import redis

    stats = redis.Redis.from_url(url).info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_"))


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def service_env(tmp: Path, database: str | None = None) -> dict[str, str]:
    """The environment of a `rag-serve` under test: default settings, its store in `tmp`, no RAG_* of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(
        RAG_CONFIG=str(ROOT / "configs" / "default.yaml"),
        RAG_QDRANT__PATH=str(tmp / "qdrant"),
        RAG_DATABASE__URL=database or f"sqlite+aiosqlite:///{tmp}/archive.db",
        RAG_TOKENS__CACHE_DIR=str(tmp / "tiktoken"),
        RAG_OBSERVABILITY__LOG_LEVEL="WARNING",
    )
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,10,100")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--redis", default=None)
    ap.add_argument("--database", default=None)
    ap.add_argument("--ttfb-delay", type=float, default=0.3)
    ap.add_argument("--ttfb-n", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "api_latency.json"))
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-"))
    env = service_env(tmp, args.database)
    if args.redis:
        env["RAG_REDIS__URL"] = args.redis
    subprocess.run([str(VENV_BIN / "rag-ingest"), "examples/kb"], env=env, cwd=ROOT, check=True, capture_output=True)

    procs: list[subprocess.Popen[bytes]] = []
    report: dict[str, Any] = {"args": vars(args), "levels": {}}
    try:
        llm_port, ttfb_port, app_port = free_port(), free_port(), free_port()
        py = str(VENV_BIN / "python")
        procs.append(start([py, "-m", "rag_service.testing.fake_llm", "--port", str(llm_port)], env))
        wait_http(f"http://127.0.0.1:{llm_port}/v1/models")
        llm = f"http://127.0.0.1:{llm_port}/v1"
        env_app = dict(env, RAG_LLM__BASE_URL=llm)
        procs.append(start([str(VENV_BIN / "rag-serve"), "--port", str(app_port)], env_app))
        base = f"http://127.0.0.1:{app_port}"
        wait_http(base + "/healthz")
        floor = asyncio.run(upstream_floor(llm))
        report["upstream_call_ms"] = round(floor * 1000, 3)
        asyncio.run(run_load(base, 2, 3))  # warm-up: query cache, connections, jieba
        for level in [int(x) for x in args.concurrency.split(",")]:
            before = redis_commands(args.redis) if args.redis else 0
            res = asyncio.run(run_load(base, level, args.turns))
            after = redis_commands(args.redis) if args.redis else 0
            lat = res["latencies"]
            # Follow-ups may call the upstream twice (rewrite + answer); count both calls as LLM time.
            overhead = [max(0.0, x - 2 * floor) for x in lat]
            row = {
                "sessions": level,
                "turns": res["turns"],
                "turns_per_s": round(res["turns"] / res["wall_s"], 1),
                "latency_p50_ms": round(pct(lat, 0.5) * 1000, 2),
                "latency_p95_ms": round(pct(lat, 0.95) * 1000, 2),
                "overhead_p50_ms": round(pct(overhead, 0.5) * 1000, 2),
                "overhead_p95_ms": round(pct(overhead, 0.95) * 1000, 2),
            }
            if args.redis:
                row["redis_commands_per_turn"] = round((after - before) / res["turns"], 1)
            report["levels"][str(level)] = row
            print(json.dumps(row))
        # Time to first streamed byte with a slow upstream.
        procs.append(
            start(
                [py, "-m", "rag_service.testing.fake_llm", "--port", str(ttfb_port), "--delay", str(args.ttfb_delay)],
                env,
            )
        )
        wait_http(f"http://127.0.0.1:{ttfb_port}/v1/models")
        procs[1].terminate()
        procs[1].wait()
        env_slow = dict(env, RAG_LLM__BASE_URL=f"http://127.0.0.1:{ttfb_port}/v1", RAG_REWRITE__MODE="rule")
        procs.append(start([str(VENV_BIN / "rag-serve"), "--port", str(app_port)], env_slow))
        wait_http(base + "/healthz")
        first = asyncio.run(ttfb(base, args.ttfb_n))
        report["ttfb"] = {
            "upstream_delay_ms": args.ttfb_delay * 1000,
            "p50_ms": round(pct(first, 0.5) * 1000, 2),
            "p95_ms": round(pct(first, 0.95) * 1000, 2),
        }
        print(json.dumps(report["ttfb"]))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
