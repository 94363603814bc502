"""`rag-serve --workers N`: several processes on one Redis and one PostgreSQL archive.

Over HTTP against a real `rag-serve --workers 2` (a subprocess on a free loopback port): concurrent turns
of one session are serialised by the Redis lock across the processes, every turn of every session is in
the archive in its order, rate limits are counted once for all workers, and `/metrics` (multiprocess
mode) adds up the turns of both. What one process owns (in-process store, SQLite, an embedded Qdrant
folder) stops `rag-serve` with a clear message instead.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from rag_core.settings import Settings, UserMemorySettings
from rag_core.tokens import TokenCounter
from rag_service.cli import workers_problem
from rag_service.domain import Message
from rag_service.sessions.archive import Archive
from rag_service.sessions.archive.memory_repo import StoredFact
from rag_service.testing.fake_llm import FakeLLM, message_text
from rag_service.user_memory import RedisVersions, RuleFactExtractor, UserMemory
from tests.servers import PrivateRedis, _free_port, fresh_database, redis_prefix

RAG_SERVE = str(Path(sys.executable).parent / "rag-serve")
QUESTION = re.compile(r"Q(\d+)-(\d+)")
PER_SESSION = 8  # the per-session rate limit of the served app, per minute


# -- what one process owns --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "needs"),
    [
        ({}, ["redis.url", "database.url", "qdrant.url"]),
        ({"redis": {"url": "redis://r"}}, ["database.url", "qdrant.url"]),
        ({"redis": {"url": "redis://r"}, "database": {"url": "postgresql://h/db"}}, ["qdrant.url"]),
        # An Edge shard folder has one writer, even at ":memory:" (a folder of that name).
        (
            {"redis": {"url": "redis://r"}, "database": {"url": "postgresql://h/db"}, "qdrant": {"path": ":memory:"}},
            ["qdrant.url"],
        ),
    ],
)
def test_several_workers_need_shared_stores(overrides: dict[str, Any], needs: list[str]) -> None:
    problem = workers_problem(Settings(**overrides), 2)
    assert problem is not None
    assert [n for n in ("redis.url", "database.url", "qdrant.url") if n in problem] == needs


@pytest.mark.parametrize("qdrant", [{"url": "http://qdrant:6333"}, {"engine": "local", "path": ":memory:"}])
def test_shared_stores_may_have_several_workers(qdrant: dict[str, str]) -> None:
    settings = Settings(redis={"url": "redis://r"}, database={"url": "postgresql://h/db"}, qdrant=qdrant)
    assert workers_problem(settings, 4) is None
    assert workers_problem(Settings(), 1) is None  # one worker owns everything it opens


def test_rag_serve_with_workers_on_single_owner_stores_exits_with_a_reason(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["RAG_QDRANT__PATH"] = str(tmp_path / "qdrant")
    result = subprocess.run(
        [RAG_SERVE, "--workers", "2", "--port", str(_free_port())],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    err = " ".join(result.stderr.split())
    assert "--workers 2 needs redis.url" in err and "SQLite archive has one writer" in err
    assert "Traceback" not in result.stderr and not (tmp_path / "qdrant").exists()


# -- user memories: a change in one process reaches the caches of the others -----------------------------


class Facts:
    """A fact store two `UserMemory` instances (two processes) share."""

    def __init__(self) -> None:
        self.facts: dict[str, list[StoredFact]] = {}

    async def add_memory(self, user_id: str, fact: str, source_session: str | None = None) -> StoredFact:
        stored = StoredFact(len(self.facts.get(user_id, [])) + 1, user_id, fact, source_session, 0.0)
        self.facts.setdefault(user_id, []).append(stored)
        return stored

    async def list_memories(self, user_id: str, limit: int | None = None) -> list[StoredFact]:
        return list(self.facts.get(user_id, []))[:limit]

    async def delete_memories(self, user_id: str) -> int:
        return len(self.facts.pop(user_id, []))


async def test_a_change_of_facts_in_one_process_reaches_the_others(counter: TokenCounter) -> None:
    async with redis_prefix() as (client, prefix):
        facts = Facts()
        settings = UserMemorySettings(cache_s=3600)

        def process() -> UserMemory:
            return UserMemory(facts, RuleFactExtractor(), counter, settings, versions=RedisVersions(client, prefix))

        a, b = process(), process()
        assert await b.profile("u1") == ("", 0)  # b caches "no facts"
        learnt = await a.learn("u1", "s1", [Message("user", "我住在上海。", 4, 0.0)])
        assert learnt == 1
        text, _ = await b.profile("u1")
        assert "上海" in text  # b read again: its cached entry was of an older version
        facts.facts.clear()
        await a.changed("u1")  # e.g. DELETE /v1/users/u1/memories answered by a
        assert await b.profile("u1") == ("", 0)


async def test_without_redis_the_cache_is_the_process_own(counter: TokenCounter) -> None:
    facts = Facts()
    um = UserMemory(facts, RuleFactExtractor(), counter, UserMemorySettings(cache_s=3600))
    await facts.add_memory("u1", "用户说：我住在上海。")
    assert "上海" in (await um.profile("u1"))[0]
    facts.facts.clear()
    assert "上海" in (await um.profile("u1"))[0]  # cached
    await um.changed("u1")
    assert await um.profile("u1") == ("", 0)


async def test_an_unreachable_version_store_reads_the_archive(counter: TokenCounter) -> None:
    client = aioredis.Redis(port=_free_port(), socket_connect_timeout=0.2)  # nothing listens there
    try:
        facts = Facts()
        um = UserMemory(facts, RuleFactExtractor(), counter, UserMemorySettings(), versions=RedisVersions(client))
        await facts.add_memory("u1", "用户说：我住在上海。")
        assert "上海" in (await um.profile("u1"))[0]
        facts.facts.clear()
        assert await um.profile("u1") == ("", 0)  # not answered from a cache that may be outdated
    finally:
        await client.aclose()


# -- two workers over HTTP ---------------------------------------------------------------------------------


def answer(request: dict[str, Any]) -> str:
    """A turn's answer names its question: `Q<session>-<turn>` -> `A<session>-<turn>`."""
    last = message_text(request["messages"][-1].get("content"))
    found = QUESTION.findall(last)
    return "A{}-{}".format(*found[-1]) if found else "OK"


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str, metrics_dir: Path, db_url: str) -> None:
        self.proc, self.url, self.metrics_dir, self.db_url = proc, url, metrics_dir, db_url
        self.lines: list[str] = []
        self.started = threading.Semaphore(0)

    def read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if "Application startup complete" in line:
                self.started.release()

    def pids_with_turns(self) -> set[str]:
        """Worker processes that have counted a turn (their multiprocess metric files)."""
        return {m.group(1) for p in self.metrics_dir.glob("counter_*.db") if (m := re.match(r"counter_(\d+)", p.name))}


@pytest.fixture
def upstream() -> Iterator[FakeLLM]:
    with FakeLLM(answer) as llm:
        yield llm


@asynccontextmanager
async def two_workers(tmp_path: Path, upstream: FakeLLM, tiktoken_dir: str) -> AsyncIterator[Served]:
    async with PrivateRedis(tmp_path) as redis_server, fresh_database("postgresql", tmp_path) as db_url:
        port = _free_port()
        metrics_dir = tmp_path / "metrics"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
        env |= {
            "RAG_CONFIG": str(Path(__file__).resolve().parent.parent / "configs" / "default.yaml"),
            "RAG_REDIS__URL": redis_server.url,
            "RAG_DATABASE__URL": db_url,
            "RAG_QDRANT__ENGINE": "local",
            "RAG_QDRANT__PATH": ":memory:",
            "RAG_TOKENS__CACHE_DIR": tiktoken_dir,
            "RAG_LLM__BASE_URL": upstream.base_url,
            "RAG_LLM__MAX_RETRIES": "0",
            "RAG_REWRITE__MODE": "none",
            "RAG_USER_MEMORY__ENABLED": "false",
            "RAG_AUTH__RATE_LIMIT__PER_SESSION": f"{PER_SESSION}/minute",
            "RAG_OBSERVABILITY__LOG_LEVEL": "WARNING",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
        proc = subprocess.Popen(
            [RAG_SERVE, "--workers", "2", "--port", str(port)],
            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        served = Served(proc, f"http://127.0.0.1:{port}", metrics_dir, db_url)
        reader = threading.Thread(target=served.read_log, daemon=True)
        reader.start()
        try:
            for _ in range(2):  # both workers have built their services
                if not await asyncio.to_thread(served.started.acquire, True, 300):
                    raise AssertionError("rag-serve workers did not start:\n" + "".join(served.lines))
            yield served
        finally:
            proc.terminate()
            await asyncio.to_thread(proc.wait, 120)
            reader.join(timeout=10)


async def turn(http: httpx.AsyncClient, sid: str, question: str, stream: bool = False) -> httpx.Response:
    # A new connection per request, so the kernel hands the requests to either worker.
    headers = {"Connection": "close"}
    return await http.post(f"/v1/sessions/{sid}/chat", json={"question": question, "stream": stream}, headers=headers)


async def test_two_workers_keep_every_turn_in_order(tmp_path: Path, upstream: FakeLLM, tiktoken_dir: str) -> None:
    async with two_workers(tmp_path, upstream, tiktoken_dir) as served:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=served.url, timeout=120, limits=limits) as http:
            # One session, many turns at once: the Redis lock lets one run at a time, in whichever worker.
            shared = (await http.post("/v1/sessions")).json()["session_id"]
            concurrent = PER_SESSION - 1
            replies = await asyncio.gather(
                *(turn(http, shared, f"Q0-{i}", stream=i % 2 == 1) for i in range(concurrent))
            )
            assert [r.status_code for r in replies] == [200] * concurrent

            # Many sessions, each asking its turns one after the other, all sessions at once; more rounds
            # until both workers have answered turns (each keeps its own metric file).
            sessions: list[str] = []
            expected: dict[str, list[str]] = {}

            async def converse(n: int, sid: str, turns: int) -> None:
                for t in range(turns):
                    resp = await turn(http, sid, f"Q{n}-{t}", stream=t == 1)
                    assert resp.status_code == 200, resp.text
                    expected[sid] += [f"Q{n}-{t}", f"A{n}-{t}"]

            for _ in range(10):  # a bound only: the kernel spreads new connections over both workers
                batch = [(await http.post("/v1/sessions")).json()["session_id"] for _ in range(12)]
                for sid in batch:
                    expected[sid] = []
                base = len(sessions) + 1
                sessions += batch
                await asyncio.gather(*(converse(base + i, sid, 3) for i, sid in enumerate(batch)))
                if len(served.pids_with_turns()) == 2:
                    break
            assert len(served.pids_with_turns()) == 2, "one worker answered every turn"
            turns_made = concurrent + 3 * len(sessions)

            # Rate limits are counted in Redis, once for both workers.
            limited = (await http.post("/v1/sessions")).json()["session_id"]
            codes = [
                (await http.get(f"/v1/sessions/{limited}/messages", headers={"Connection": "close"})).status_code
                for _ in range(PER_SESSION + 4)
            ]
            assert codes == [200] * PER_SESSION + [429] * 4

            # Metrics of both workers add up, whichever worker answers the scrape.
            for _ in range(4):
                text = (await http.get("/metrics", headers={"Connection": "close"})).text
                counted = sum(float(v) for v in re.findall(r"^rag_turns_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))
                assert counted == turns_made

        # Stopping flushes the write-behind; then the archive alone must hold every turn, in order.
        served.proc.terminate()
        assert await asyncio.to_thread(served.proc.wait, 120) == 0, "".join(served.lines)
        archive = Archive(served.db_url)
        try:
            loaded = await archive.load(shared)
            assert loaded is not None
            contents = [m.content for m in loaded[1]]
            assert len(contents) == 2 * concurrent
            pairs = list(zip(contents[::2], contents[1::2], strict=True))
            # Every question is followed by its own answer: no turn ran inside another.
            assert all(q.replace("Q", "A") == a for q, a in pairs)
            assert sorted(q for q, _ in pairs) == sorted(f"Q0-{i}" for i in range(concurrent))
            for sid in sessions:
                stored = await archive.load(sid)
                assert stored is not None and [m.content for m in stored[1]] == expected[sid]
        finally:
            await archive.close()
