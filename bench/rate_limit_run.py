"""A customer-service frontend under the default rate limits: many sessions, one API key, real HTTP.

    .venv/bin/python bench/rate_limit_run.py                              # 100 sessions x 5 turns, 32 threads
    .venv/bin/python bench/rate_limit_run.py --auth open                  # open mode (one shared bucket)
    .venv/bin/python bench/rate_limit_run.py --redis redis://127.0.0.1:6379/15 --workers 2

Ingests examples/kb into a temporary Qdrant folder, starts the project's fake OpenAI-compatible upstream
(zero delay) and `rag-serve` on free loopback ports with the default `auth.rate_limit` settings, then
`--threads` client threads share `--sessions` conversations of `--turns` turns each (every session:
create, then its turns back to back, the way a frontend relays its users). With `--auth keys` (the
default) the frontend holds one client key; `--auth open` runs with no keys. Every response that is not
a success counts as an error, 429s included; the script exits 1 if there was any. With `--redis` the
limits are counted in Redis (and the session store is Redis too), shared by `--workers` processes
(which then need a Qdrant server: `--qdrant-url`). Writes bench/results/rate_limit_run.json.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_latency import conversation, free_port, pct, service_env, start, wait_http  # noqa: E402
from rag_service.auth import hash_key  # noqa: E402

VENV_BIN = Path(sys.executable).parent
# A safety net against a hung server, not a measurement.
REQUEST_TIMEOUT_S = 120


def run_sessions(base: str, key: str | None, sessions: int, turns: int, threads: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    local = threading.local()
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    latencies: dict[str, list[float]] = {"create": [], "chat": []}
    lock = threading.Lock()

    def client() -> httpx.Client:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=base, headers=headers, timeout=REQUEST_TIMEOUT_S)
        http: httpx.Client = local.http
        return http

    def record(kind: str, resp: httpx.Response, took: float) -> bool:
        with lock:
            statuses[resp.status_code] += 1
            latencies[kind].append(took)
            if not resp.is_success:
                errors.append(f"{resp.request.method} {resp.request.url.path} -> {resp.status_code}: {resp.text[:200]}")
        return resp.is_success

    def one(i: int) -> None:
        http = client()
        t = time.perf_counter()
        resp = http.post("/v1/sessions", json={"user": f"user-{i}"})
        if not record("create", resp, time.perf_counter() - t):
            return
        sid = resp.json()["session_id"]
        for question in conversation(i, turns):
            t = time.perf_counter()
            resp = http.post(f"/v1/sessions/{sid}/chat", json={"question": question})
            record("chat", resp, time.perf_counter() - t)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(one, i) for i in range(sessions)]:
            future.result()
    wall = time.perf_counter() - started
    requests = sum(statuses.values())
    return {
        "requests": requests,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": len(errors),
        "first_errors": errors[:5],
        "wall_s": round(wall, 2),
        "requests_per_s": round(requests / wall, 1),
        **{
            f"{kind}_{name}_ms": round(pct(values, q) * 1000, 1)
            for kind, values in latencies.items()
            for name, q in (("p50", 0.5), ("p95", 0.95), ("max", 1.0))
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--auth", choices=["keys", "open"], default="keys")
    ap.add_argument("--redis", default=None, help="count limits (and keep sessions) in this Redis")
    ap.add_argument("--qdrant-url", default=None, help="a Qdrant server (needed for --workers > 1)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--no-limits", action="store_true", help="switch the rate limits off (for comparison)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "rate_limit_run.json"))
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rag-ratelimit-"))
    env = service_env(tmp)
    if args.qdrant_url:
        env["RAG_QDRANT__URL"] = args.qdrant_url
        env["RAG_QDRANT__COLLECTION"] = f"ratelimit_{secrets.token_hex(4)}"
    if args.redis:
        env["RAG_REDIS__URL"] = args.redis
        env["RAG_AUTH__RATE_LIMIT__KEY_PREFIX"] = f"rag-bench:{secrets.token_hex(4)}:limits"
    if args.no_limits:
        for scope in ("PER_KEY", "PER_SESSION", "PER_ADDRESS"):
            env[f"RAG_AUTH__RATE_LIMIT__{scope}"] = ""
    key: str | None = None
    if args.auth == "keys":
        key = secrets.token_urlsafe(24)
        env["RAG_AUTH__TENANTS"] = json.dumps({"shop": [hash_key(key)]})
    ingest = [str(VENV_BIN / "rag-ingest"), "examples/kb"]
    if args.auth == "keys":
        ingest += ["--tenant", "shop"]
    subprocess.run(ingest, env=env, cwd=ROOT, check=True, capture_output=True)

    procs: list[subprocess.Popen[bytes]] = []
    try:
        llm_port, app_port = free_port(), free_port()
        py = str(VENV_BIN / "python")
        procs.append(start([py, "-m", "rag_service.testing.fake_llm", "--port", str(llm_port)], env))
        wait_http(f"http://127.0.0.1:{llm_port}/v1/models")
        env_app = dict(env, RAG_LLM__BASE_URL=f"http://127.0.0.1:{llm_port}/v1")
        serve = [str(VENV_BIN / "rag-serve"), "--port", str(app_port), "--workers", str(args.workers)]
        procs.append(start(serve, env_app))
        base = f"http://127.0.0.1:{app_port}"
        wait_http(base + "/healthz")
        result = run_sessions(base, key, args.sessions, args.turns, args.threads)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
    report = {
        "command": " ".join(["bench/rate_limit_run.py", *sys.argv[1:]]),
        "sessions": args.sessions,
        "turns": args.turns,
        "threads": args.threads,
        "auth": args.auth,
        "redis": bool(args.redis),
        "workers": args.workers,
        "limits": not args.no_limits,
        **result,
    }
    print(json.dumps(report, ensure_ascii=False, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
