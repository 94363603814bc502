"""Load run: N sessions x M turns against `rag-serve`, then every turn checked in the archive.

    .venv/bin/python bench/load.py                                   # 200 x 5, 2 workers, Redis + PostgreSQL
    .venv/bin/python bench/load.py --sessions 50 --turns 3 --workers 1
    .venv/bin/python bench/load.py --url http://127.0.0.1:8000 --database-url postgresql+asyncpg://...

Without `--url` it starts everything itself on free loopback ports: a redis-server of its own (no
persistence), a fresh PostgreSQL database on `--postgres` (dropped afterwards), the project's fake
OpenAI-compatible upstream (zero delay, its own process) and `rag-serve --workers N` with the default
settings otherwise (LLM rewriting included), then stops the service (SIGTERM: the write-behind is
flushed) before it reads the archive. With `--url` it drives a service that is already running and
waits (at most `--verify-s`) for the write-behind to reach the archive at `--database-url`.

Every session: create, then its turns one after the other (odd turns streamed), `--concurrency`
sessions at a time. An error is any non-2xx reply or a stream that does not end with `done`. Then, from
the archive alone: every session holds exactly its questions, in the order sent, each followed by one
answer (lost = a turn missing, misordered = a turn out of place). Bounded: `--max-s` for the whole run,
loopback addresses only. Writes bench/results/load.json; exits 1 on any error, lost or misordered turn.

Turn overhead: the client's time per turn (request to last byte) and the server's own time outside the
LLM call (the receipt's `timings_ms` without `generate`), both p50/p95. The upstream answers at once, so
the client's time is the service's overhead plus two loopback round trips to the fake.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.api_latency import conversation, free_port, pct  # noqa: E402
from rag_service.auth import is_loopback  # noqa: E402
from rag_service.sessions.archive import Archive  # noqa: E402

VENV_BIN = Path(sys.executable).parent


def require_loopback(url: str, what: str) -> None:
    host = urlparse(url).hostname or ""
    if not is_loopback(host):
        raise SystemExit(f"{what} must be a loopback address (this script only loads the local machine): {url}")


class Stack:
    """redis-server, a fresh PostgreSQL database, the fake upstream and rag-serve, started and stopped."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.procs: list[subprocess.Popen[str]] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="rag-load-"))
        self.db_name = f"rag_load_{secrets.token_hex(5)}"
        self.db_url = make_url(args.postgres).set(database=self.db_name).render_as_string(hide_password=False)
        self.url = ""
        self.serve: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self.created = False

    async def start(self) -> None:
        a = self.args
        engine = create_async_engine(a.postgres, isolation_level="AUTOCOMMIT")
        async with engine.connect() as conn:
            await conn.execute(sa.text(f"CREATE DATABASE \"{self.db_name}\" ENCODING 'UTF8'"))
        await engine.dispose()
        self.created = True
        redis_port, llm_port, app_port = free_port(), free_port(), free_port()
        redis_bin = shutil.which("redis-server") or "redis-server"
        redis_cmd = [redis_bin, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.procs.append(subprocess.Popen(redis_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True))
        fake = [sys.executable, "-m", "rag_service.testing.fake_llm", "--port", str(llm_port)]
        self.procs.append(subprocess.Popen(fake, cwd=ROOT, stdout=subprocess.PIPE, text=True))
        assert self.procs[-1].stdout is not None
        self.procs[-1].stdout.readline()  # listening
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
        env |= {
            "RAG_CONFIG": str(ROOT / "configs" / "default.yaml"),
            "RAG_REDIS__URL": f"redis://127.0.0.1:{redis_port}/0",
            "RAG_DATABASE__URL": self.db_url,
            # No Qdrant server here: every worker has an empty local-mode index of its own in memory
            # (queries are still embedded).
            "RAG_QDRANT__ENGINE": "local",
            "RAG_QDRANT__PATH": a.qdrant_path,
            "RAG_TOKENS__CACHE_DIR": str(ROOT / "data" / "tiktoken"),
            "RAG_LLM__BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
            "RAG_OBSERVABILITY__LOG_LEVEL": "WARNING",
            "PROMETHEUS_MULTIPROC_DIR": str(self.tmp / "metrics"),
        }
        cmd = [str(VENV_BIN / "rag-serve"), "--workers", str(a.workers), "--port", str(app_port)]
        self.serve = subprocess.Popen(
            cmd, env=env, cwd=self.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        started = threading.Semaphore(0)

        def read() -> None:
            assert self.serve is not None and self.serve.stderr is not None
            for line in self.serve.stderr:
                self.log.append(line)
                if "Application startup complete" in line:
                    started.release()

        threading.Thread(target=read, daemon=True).start()
        for _ in range(a.workers):
            if not await asyncio.to_thread(started.acquire, True, 300):
                raise RuntimeError("rag-serve did not start:\n" + "".join(self.log))
        self.url = f"http://127.0.0.1:{app_port}"

    def stop_service(self) -> int:
        if self.serve is None or self.serve.poll() is not None:
            return self.serve.returncode if self.serve is not None else 0
        self.serve.terminate()
        return self.serve.wait(120)

    async def close(self) -> None:
        self.stop_service()
        for proc in reversed(self.procs):
            proc.terminate()
            proc.wait(30)
        if not self.created:
            return
        engine = create_async_engine(self.args.postgres, isolation_level="AUTOCOMMIT")
        async with engine.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)'))
        await engine.dispose()
        shutil.rmtree(self.tmp, ignore_errors=True)


async def drive(url: str, args: argparse.Namespace) -> dict[str, Any]:
    sent: dict[str, list[str]] = {}
    client_ms: list[float] = []
    server_ms: list[float] = []
    errors: list[str] = []
    stages: dict[str, list[float]] = {}
    gate = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def session(i: int) -> None:
            async with gate:
                resp = await http.post("/v1/sessions")
                if resp.status_code != 201:
                    errors.append(f"create: {resp.status_code} {resp.text[:200]}")
                    return
                sid = resp.json()["session_id"]
                sent[sid] = []
                for t, question in enumerate(conversation(i, args.turns)):
                    stream = t % 2 == 1
                    t0 = time.perf_counter()
                    resp = await http.post(f"/v1/sessions/{sid}/chat", json={"question": question, "stream": stream})
                    took = (time.perf_counter() - t0) * 1000
                    sent[sid].append(question)
                    receipt = _receipt(resp, stream)
                    if receipt is None:
                        errors.append(f"turn: {resp.status_code} {resp.text[-200:]}")
                        continue
                    client_ms.append(took)
                    server_ms.append(sum(v for k, v in receipt["timings_ms"].items() if k != "generate"))
                    for stage, ms in receipt["timings_ms"].items():
                        stages.setdefault(stage, []).append(ms)

        t0 = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(session(i) for i in range(args.sessions))), args.max_s)
        wall = time.perf_counter() - t0
    return {
        "sent": sent,
        "client_ms": client_ms,
        "server_ms": server_ms,
        "stages": stages,
        "errors": errors,
        "wall_s": wall,
    }


def _receipt(resp: httpx.Response, stream: bool) -> dict[str, Any] | None:
    if resp.status_code != 200:
        return None
    if not stream:
        return dict(resp.json()["receipt"])
    event, done = "", None
    for line in resp.text.splitlines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event == "done":
            done = json.loads(line[5:])
    return dict(done["receipt"]) if done else None


async def verify(db_url: str, sent: dict[str, list[str]], wait_s: float) -> dict[str, int]:
    """Lost and misordered turns, from the archive alone."""
    archive = Archive(db_url)
    lost = misordered = 0
    try:
        deadline = time.monotonic() + wait_s
        for sid, questions in sent.items():
            while True:
                loaded = await archive.load(sid)
                messages = loaded[1] if loaded else []
                if len(messages) >= 2 * len(questions) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)  # write-behind of a running service still on its way
            roles = [m.role for m in messages]
            users = [m.content for m in messages if m.role == "user"]
            lost += max(0, len(questions) - len(users))
            if users != questions[: len(users)] or roles != ["user", "assistant"] * (len(roles) // 2):
                misordered += 1
    finally:
        await archive.close()
    return {"lost_turns": lost, "misordered_sessions": misordered}


async def main_async(args: argparse.Namespace) -> int:
    stack: Stack | None = None
    if args.url:
        require_loopback(args.url, "--url")
        if not args.database_url:
            raise SystemExit("--url needs --database-url (the archive the turns are verified in)")
        url, db_url = args.url, args.database_url
    else:
        require_loopback(args.postgres, "--postgres")
        stack = Stack(args)
        url, db_url = "", stack.db_url
    try:
        if stack is not None:
            await stack.start()
            url = stack.url
        run = await drive(url, args)
        if stack is not None:
            status = await asyncio.to_thread(stack.stop_service)
            if status != 0:
                run["errors"].append(f"rag-serve exited with {status}")
        checked = await verify(db_url, run["sent"], args.verify_s)
    finally:
        if stack is not None:
            await stack.close()
    turns = sum(len(q) for q in run["sent"].values())
    report = {
        "command": " ".join(["bench/load.py", *sys.argv[1:]]),
        "sessions": args.sessions,
        "turns_per_session": args.turns,
        "workers": args.workers if stack else None,
        "concurrency": args.concurrency,
        "turns": turns,
        "errors": len(run["errors"]),
        "error_samples": run["errors"][:5],
        **checked,
        "wall_s": round(run["wall_s"], 2),
        "turns_per_s": round(turns / run["wall_s"], 1) if run["wall_s"] else None,
        "client_turn_ms": {"p50": round(pct(run["client_ms"], 0.5), 2), "p95": round(pct(run["client_ms"], 0.95), 2)},
        "server_overhead_ms": {
            "p50": round(pct(run["server_ms"], 0.5), 2),
            "p95": round(pct(run["server_ms"], 0.95), 2),
        },
        "stage_ms": {
            stage: {"p50": round(pct(ms, 0.5), 2), "p95": round(pct(ms, 0.95), 2)}
            for stage, ms in run["stages"].items()
        },
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2, ensure_ascii=False))
    bad = (
        report["errors"] or report["lost_turns"] or report["misordered_sessions"] or turns != args.sessions * args.turns
    )
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=50, help="sessions in flight at once")
    parser.add_argument("--workers", type=int, default=2, help="rag-serve worker processes (self-started)")
    parser.add_argument("--url", help="a running service (loopback) instead of starting one")
    parser.add_argument("--database-url", help="its archive, with --url")
    parser.add_argument(
        "--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test", help="server for the fresh database"
    )
    parser.add_argument("--qdrant-path", default=":memory:", help="qdrant.path of the self-started service")
    parser.add_argument("--max-s", type=float, default=900, help="the whole run's time bound")
    parser.add_argument("--verify-s", type=float, default=60, help="how long the archive may lag (with --url)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "load.json")
    args = parser.parse_args()
    if args.sessions < 1 or args.turns < 1 or args.sessions * args.turns > 100_000:
        raise SystemExit("--sessions x --turns must be between 1 and 100000")

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds through the cleanup of what was started

    signal.signal(signal.SIGTERM, stop)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
