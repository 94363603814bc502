"""Per-call overhead of the LLM client: today's `ChatClient` (AsyncOpenAI) against the aiohttp client it
replaced (`git show REV:rag_service/llm.py`, imported from a temporary file), on the same fake upstream
on loopback.

The fake upstream (`python -m rag_service.testing.fake_llm`, zero delay) runs in its own process, so its
threads do not share this process's GIL with the client being measured. Each round makes one call of
each client, in alternating order, so both see the same machine load. A call is timed from the request
to the last piece (stream) or the parsed reply (plain); with a zero-delay upstream that is the client's
own cost plus one loopback round trip, the same for both.

    .venv/bin/python bench/llm_client.py                 # 500 calls each, plain and streamed, ~1 min
    .venv/bin/python bench/llm_client.py --calls 2000 --old-ref REV   # REV: any revision with the old client

Writes bench/results/llm_client.json; exits 1 when the new client's p50 is more than `--budget-ms`
(2 ms) above the old one's, plain or streamed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rag_core.settings import LLMEndpoint  # noqa: E402
from rag_service import llm as new_llm  # noqa: E402

MESSAGES = [
    {"role": "system", "content": "你是星辰数码的在线客服助手。只根据资料回答。"},
    {"role": "user", "content": "以下是检索到的资料：\n" + "手机保修两年，电池保修一年，屏幕碎裂不在保修范围内。" * 20},
    # The fake answers with its first 60 characters: a reply of 73 characters, 37 streamed deltas.
    {
        "role": "user",
        "content": "用户的问题：我上个月买的手机屏幕出现了绿线，还在保修期内吗？如果在的话，需要带上哪些材料去门店办理，大概需要多久能修好？",
    },
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def aiohttp_client_ref() -> str:
    """The last revision whose rag_service/llm.py was the aiohttp client: the parent of the commit that
    removed `import aiohttp` from it."""
    removed = git("log", "-1", "--format=%H", "-G", "^import aiohttp", "--", "rag_service/llm.py")
    return f"{removed}^"


def load_old_client(ref: str) -> ModuleType:
    """`rag_service/llm.py` as it was at `ref`, imported from a temporary file."""
    source = subprocess.run(
        ["git", "show", f"{ref}:rag_service/llm.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="llm-old-")) / "llm_old.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("llm_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def start_upstream(port: int, chunk_chars: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_service.testing.fake_llm", "--port", str(port), "--chunk-chars", str(chunk_chars)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "fake LLM listening on ..."
    return proc


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(call: Callable[[Any], Awaitable[None]], client: Any) -> float:
    t0 = time.perf_counter()
    await call(client)
    return (time.perf_counter() - t0) * 1000


async def run(args: argparse.Namespace) -> dict[str, Any]:
    args.old_ref = args.old_ref or aiohttp_client_ref()
    old_llm = load_old_client(args.old_ref)
    port = free_port()
    upstream = start_upstream(port, args.chunk_chars)
    endpoint = LLMEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model="bench", max_tokens=256)
    clients: dict[str, Any] = {"old": old_llm.ChatClient(endpoint), "new": new_llm.ChatClient(endpoint)}

    async def plain(client: Any) -> None:
        await client.complete(MESSAGES)

    async def streamed(client: Any) -> None:
        async for _ in client.stream(MESSAGES):
            pass

    results: dict[str, Any] = {}
    try:
        for kind, call in (("plain", plain), ("stream", streamed)):
            times: dict[str, list[float]] = {"old": [], "new": []}
            for client in clients.values():  # warm-up: connections, first-call imports
                for _ in range(args.warmup):
                    await call(client)
            for i in range(args.calls):
                order = ("old", "new") if i % 2 == 0 else ("new", "old")
                for name in order:
                    times[name].append(await timed(call, clients[name]))
            results[kind] = {
                name: {
                    "p50_ms": round(statistics.median(t), 3),
                    "p95_ms": round(percentile(t, 0.95), 3),
                    "mean_ms": round(statistics.fmean(t), 3),
                }
                for name, t in times.items()
            }
            results[kind]["p50_delta_ms"] = round(results[kind]["new"]["p50_ms"] - results[kind]["old"]["p50_ms"], 3)
            results[kind]["p95_delta_ms"] = round(results[kind]["new"]["p95_ms"] - results[kind]["old"]["p95_ms"], 3)
    finally:
        for client in clients.values():
            await client.close()
        upstream.terminate()
        upstream.wait(timeout=10)
    return {
        "calls": args.calls,
        "old": f"{args.old_ref}:rag_service/llm.py (aiohttp)",
        "new": "rag_service/llm.py (AsyncOpenAI)",
        "reply_chars": len(f"[fake:bench] {MESSAGES[-1]['content'][:60]}"),
        "chunk_chars": args.chunk_chars,
        "results": results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="timed calls per client and kind")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--chunk-chars", type=int, default=2, help="characters per streamed delta")
    parser.add_argument(
        "--old-ref", default=None, help="git revision of the old client (default: the last aiohttp one)"
    )
    parser.add_argument("--budget-ms", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "llm_client.json")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"{'kind':8} {'client':5} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for kind, rows in report["results"].items():
        for name in ("old", "new"):
            r = rows[name]
            print(f"{kind:8} {name:5} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} {r['mean_ms']:8.3f}")
        print(f"{kind:8} delta p50 {rows['p50_delta_ms']:+.3f} ms, p95 {rows['p95_delta_ms']:+.3f} ms")
    over = [k for k, rows in report["results"].items() if rows["p50_delta_ms"] > args.budget_ms]
    if over:
        print(f"over the {args.budget_ms} ms budget: {', '.join(over)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
