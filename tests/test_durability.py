"""Nothing acknowledged is lost when a part fails: the write-behind and restore against a killed and
restarted Redis, position conflicts between a live copy and the archive, the archive down at shutdown
(spool), session locks released on every exit, store outages as 503s.

Real servers: a private redis-server per test that kills it (servers.PrivateRedis), the shared Redis with
a key prefix, SQLite and PostgreSQL (servers.fresh_database).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from rag_service.api import create_app
from rag_service.domain import Message, SessionMeta
from rag_service.sessions.archive import Archive, Cipher
from rag_service.sessions.interface import (
    AlsoWrite,
    ArchiveWrite,
    GapFill,
    SessionBusy,
    StoreUnavailable,
    SummaryUpdate,
    new_session_id,
)
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.live_redis import RedisStore
from rag_service.sessions.spool import Spool
from rag_service.sessions.writebehind import ArchivedStore
from rag_service.testing.fake_llm import FakeLLM
from rag_service.wiring import Services
from tests.servers import REDIS_URL, PrivateRedis, fresh_database, redis_prefix
from tests.sse import events as sse_events
from tests.stores import write_behind


def msg(role: str, text: str) -> Message:
    return Message(role, text, len(text), time.time())  # type: ignore[arg-type]


def turn(label: str) -> list[Message]:
    return [msg("user", f"问题 {label}：发票怎么开？"), msg("assistant", f"回答 {label}：在订单页申请。")]


def new_meta() -> SessionMeta:
    return SessionMeta(session_id=new_session_id(16), created_at=time.time())


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


async def archived(url: str, session_id: str) -> tuple[SessionMeta, list[Message]]:
    archive = Archive(url)
    try:
        found = await archive.load(session_id)
    finally:
        await archive.close()
    assert found is not None
    return found


@asynccontextmanager
async def serving(services: Services, timeout: float = 30) -> AsyncIterator[httpx.AsyncClient]:
    """The app on `services` and a client for it; the services' clients and store are closed afterwards
    (not the shared index)."""
    app = create_app(services=services)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=timeout) as http,
        ):
            yield http
    finally:
        await services.pipeline.drain()
        for client in services.clients:
            await client.close()
        await services.store.close()


class GatedArchive:
    """The archive with its batch writes held at a gate: a flush "in flight" for as long as the test wants.
    Records the order of calls so a test can see whether a restore read the archive mid-write."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self.gate = asyncio.Event()
        self.gate.set()
        self.writing = asyncio.Event()
        self.calls: list[str] = []

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        self.calls.append("write")
        self.writing.set()
        await self.gate.wait()
        result = await self.archive.write_batch(writes, fill, also=also)
        self.calls.append("written")
        return result

    async def load(self, session_id: str) -> tuple[SessionMeta, list[Message]] | None:
        self.calls.append("load")
        return await self.archive.load(session_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


@pytest.fixture
async def redis_live() -> AsyncIterator[Callable[..., RedisStore]]:
    """RedisStore factory on the shared Redis under a throw-away key prefix."""
    opened: list[RedisStore] = []
    async with redis_prefix() as (_, prefix):

        def make(**kwargs: Any) -> RedisStore:
            options: dict[str, Any] = {"ttl_s": 60, "lock_timeout_s": 5.0, "on_busy": "wait", "prefix": prefix}
            store = RedisStore(REDIS_URL, **{**options, **kwargs})
            opened.append(store)
            return store

        yield make
        for store in opened:
            await store.close()


# -- restore waits for the writes in flight ------------------------------------------------------------


async def test_restore_waits_for_a_flush_in_flight(sqlite_url: str) -> None:
    """The fault probe's lost turn: Redis restarted while a flush held the session's last turn in flight;
    the restore read the archive without it and the next turn reused its positions."""
    gated = GatedArchive(Archive(sqlite_url))
    live = MemoryStore(60, 5.0, "wait")
    store = ArchivedStore(live, gated, flush_interval_s=0.001)
    try:
        meta = new_meta()
        await store.create(meta)
        await store.append(meta.session_id, turn("0"))
        await store.flush()
        gated.gate.clear()
        gated.writing.clear()
        await store.append(meta.session_id, turn("1"))  # acknowledged: in the live store, queued
        await gated.writing.wait()  # the background flush now holds turn 1 in flight
        assert store.pending == 1
        live.clear()  # the live store loses everything (a Redis restart)
        loading = asyncio.create_task(store.load(meta.session_id, lambda m: 0))
        for _ in range(20):  # give a restore that does not wait every chance to read the archive now
            await asyncio.sleep(0)
        assert "load" not in gated.calls and not loading.done()
        gated.gate.set()
        _, restored, _ = await loading
        assert texts(restored) == texts(turn("0") + turn("1"))
        assert gated.calls.index("load") > gated.calls.index("written")
        await store.append(meta.session_id, turn("2"))
        await store.flush()
        _, rows = await archived(sqlite_url, meta.session_id)
        assert texts(rows) == texts(turn("0") + turn("1") + turn("2"))
    finally:
        gated.gate.set()
        await store.close()


# -- a position conflict is resolved, never a silent drop ----------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_position_conflict_keeps_both_turns_and_the_live_copy_follows(
    kind: str, sqlite_url: str, redis_live: Callable[..., RedisStore]
) -> None:
    """Two copies of a session numbered their messages differently: process A's turn 2 reached the
    archive after B restored the session without it, and B's turn 3 took the same positions."""
    shared_live = redis_live() if kind == "redis" else MemoryStore(60, 5.0, "wait")
    a = ArchivedStore(shared_live, Archive(sqlite_url), flush_interval_s=60)
    b = ArchivedStore(shared_live, Archive(sqlite_url), flush_interval_s=60)
    conflicts: list[int] = []
    b.on_conflict = lambda: conflicts.append(1)
    try:
        meta = new_meta()
        await a.create(meta)
        await a.append(meta.session_id, turn("1"))
        await a.flush()
        t2 = turn("2")
        await a.append(meta.session_id, t2)  # acknowledged, queued in A
        await shared_live.evict(meta.session_id)  # the live copy is lost before A's flush
        await b.load(meta.session_id, lambda m: 0)  # B restores from the archive: turn 2 is not there
        t3 = turn("3")
        await b.append(meta.session_id, t3)  # positions 2 and 3 again
        await b.flush()
        await a.flush()  # A's turn 2 arrives: its positions are taken by a different turn
        _, rows = await archived(sqlite_url, meta.session_id)
        assert texts(rows) == texts(turn("1") + t3 + t2)  # both kept, in the order they reached the archive
        assert a.conflicts == 1 and b.conflicts == 0
        # A reconciled under the session lock: the stale live copy was dropped; its next use restores.
        assert texts(await b.messages(meta.session_id)) == texts(rows)
        # Replays of either write change nothing.
        await a.archive.write_batch([ArchiveWrite(meta.session_id, None, ((2, t2[0]), (3, t2[1])))])
        await b.archive.write_batch([ArchiveWrite(meta.session_id, None, ((2, t3[0]), (3, t3[1])))])
        _, again = await archived(sqlite_url, meta.session_id)
        assert again == rows
        await b.append(meta.session_id, turn("4"))
        await b.flush()
        _, rows = await archived(sqlite_url, meta.session_id)
        assert texts(rows) == texts(turn("1") + t3 + t2 + turn("4"))
        assert texts(await b.messages(meta.session_id)) == texts(rows)
    finally:
        await a.close()
        await b.close()


async def test_live_only_messages_are_copied_before_a_stale_live_copy_is_dropped(sqlite_url: str) -> None:
    """The reconciliation drops the live copy only once the archive holds everything it had (a write lost
    with a crashed process is there only)."""
    live = MemoryStore(60, 5.0, "wait")
    store = ArchivedStore(live, Archive(sqlite_url), flush_interval_s=60)
    other = Archive(sqlite_url)
    try:
        meta = new_meta()
        await store.create(meta)
        await store.append(meta.session_id, turn("1"))
        await store.flush()
        await store.append(meta.session_id, turn("lost"))
        store._pending.clear()  # this write died with its process; only the live copy has it
        await other.write_batch([ArchiveWrite(meta.session_id, None, tuple(enumerate(turn("elsewhere"), 2)))])
        await store.append(meta.session_id, turn("3"))  # positions 4, 5: free in the archive
        await store.append(meta.session_id, turn("4"))
        await other.write_batch([ArchiveWrite(meta.session_id, None, tuple(enumerate(turn("late"), 6)))])
        await store.flush()  # turn 4's positions (6, 7) are taken: conflict, reconciliation
        _, rows = await archived(sqlite_url, meta.session_id)
        assert set(texts(turn("1") + turn("lost") + turn("elsewhere") + turn("3") + turn("4") + turn("late"))) == set(
            texts(rows)
        )
        assert len(rows) == 12
        assert texts(await store.messages(meta.session_id)) == texts(rows)
    finally:
        await store.close()
        await other.close()


# -- summarized <= message_count in every store ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_summary_of_messages_the_session_does_not_hold_is_refused(
    kind: str, redis_live: Callable[..., RedisStore]
) -> None:
    store = redis_live() if kind == "redis" else MemoryStore(60, 5.0, "wait")
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, turn("0"))
    # A plan made over a longer (client-sent) list than the stored one.
    assert not await store.update_summary(meta.session_id, SummaryUpdate(0, "摘要", 3, 6, 40))
    assert not await store.update_summary(meta.session_id, SummaryUpdate(0, "摘要", 3, -1, 40))
    await store.set_topic_start(meta.session_id, 9)
    got, _, _ = await store.load(meta.session_id, lambda m: 0)
    assert (got.summarized, got.summary, got.topic_start, got.message_count) == (0, "", 2, 2)
    assert await store.update_summary(meta.session_id, SummaryUpdate(0, "摘要", 3, 2, 40))
    got, _, _ = await store.load(meta.session_id, lambda m: 0)
    assert got.summarized == 2 <= got.message_count


# -- the archive down at shutdown: the spool ---------------------------------------------------------------


class DownArchive:
    """An archive whose database is unreachable."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        raise StoreUnavailable("archive", "connection refused")

    async def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        raise StoreUnavailable("archive", "connection refused")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


@pytest.mark.parametrize("encrypted", [False, True])
async def test_archive_down_at_shutdown_spools_and_the_next_start_writes(
    encrypted: bool, sqlite_url: str, tmp_path: Path
) -> None:
    key = Fernet.generate_key().decode() if encrypted else None
    spool_dir = tmp_path / "spool"
    first = ArchivedStore(
        MemoryStore(60, 5.0, "wait"),
        DownArchive(Archive(sqlite_url, key)),
        flush_interval_s=60,
        spool=Spool(spool_dir, Cipher(key) if key else None),
    )
    meta = new_meta()
    await first.create(meta)
    await first.append(meta.session_id, turn("0"))
    await first.update_summary(meta.session_id, SummaryUpdate(0, "用户问发票", 5, 2, 30))
    await first.append(meta.session_id, turn("1"))
    assert first.pending == 1
    await first.close()  # the in-process live store is gone with this process
    files = list(spool_dir.glob("spool-*.jsonl"))
    assert len(files) == 1
    raw = files[0].read_text(encoding="utf-8")
    assert ("发票" in raw) is not encrypted

    archive = Archive(sqlite_url, key)
    second = ArchivedStore(
        MemoryStore(60, 5.0, "wait"), archive, flush_interval_s=60, spool=Spool(spool_dir, archive.cipher)
    )
    try:
        await second.start()
        assert second.pending == 1
        await second.flush()
        assert not list(spool_dir.glob("spool-*.jsonl"))  # written: the spool is removed
        got, loaded, _ = await second.load(meta.session_id, lambda m: 0)
        assert texts(loaded) == texts(turn("0") + turn("1"))
        assert (got.summary, got.summarized) == ("用户问发票", 2)
    finally:
        await second.close()


# -- session locks: released on every exit, short leases ------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_cancelled_turn_releases_its_lock_at_once(kind: str, redis_live: Callable[..., RedisStore]) -> None:
    """As sse-starlette cancels a stream whose client left: an anyio scope cancels every await inside
    it, the lock release included unless it is shielded. The lease is long here, so only a release (not
    an expiry) frees the lock; reject mode then proves it free without waiting."""
    store = redis_live(lock_lease_s=60.0) if kind == "redis" else MemoryStore(60, 60.0, "wait")
    probe = redis_live(lock_lease_s=60.0, on_busy="reject") if kind == "redis" else store
    meta = new_meta()
    await store.create(meta)
    entered = asyncio.Event()

    async def turn_cut_mid_stream() -> None:
        with anyio.CancelScope() as scope:
            async with store.lock(meta.session_id):
                entered.set()
                scope.cancel()
                await asyncio.sleep(3600)  # "generating"

    task = asyncio.create_task(turn_cut_mid_stream())
    await entered.wait()
    await task
    if isinstance(store, RedisStore):
        assert not await store.redis.exists(store._key(meta.session_id, "lock"))
    if isinstance(probe, MemoryStore):
        probe.on_busy = "reject"
    async with probe.lock(meta.session_id):
        pass


async def test_asyncio_cancel_of_a_turn_releases_its_lock(redis_live: Callable[..., RedisStore]) -> None:
    store = redis_live(lock_lease_s=60.0)
    probe = redis_live(lock_lease_s=60.0, on_busy="reject")
    meta = new_meta()
    await store.create(meta)
    entered = asyncio.Event()

    async def holder() -> None:
        async with store.lock(meta.session_id):
            entered.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(holder())
    await entered.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    async with probe.lock(meta.session_id):
        pass


_HOLDER = """
import asyncio, sys
from rag_service.sessions.live_redis import RedisStore

async def main() -> None:
    store = RedisStore(sys.argv[1], ttl_s=60, lock_timeout_s=5, on_busy="wait", lock_lease_s=float(sys.argv[3]),
                       prefix=sys.argv[4])
    async with store.lock(sys.argv[2]):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_lock_of_a_killed_process_expires_within_its_lease(redis_live: Callable[..., RedisStore]) -> None:
    """A process that dies holding a lock (kill -9: no release, no renewal) blocks its session for at most
    the lease, not for lock_timeout_s."""
    store = redis_live(lock_timeout_s=30.0, lock_lease_s=1.0)
    meta = new_meta()
    await store.create(meta)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, REDIS_URL, meta.session_id, "1.0", store.prefix],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == b"held"
        key = store._key(meta.session_id, "lock")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # Whatever renewal the holder managed last, at most one lease remains (-2: expired already).
        assert await store.redis.pttl(key) <= 1000
        async with store.lock(meta.session_id):  # waits out the lease, far less than lock_timeout_s
            assert await store.redis.exists(key)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def test_lease_is_renewed_while_a_long_turn_runs(redis_live: Callable[..., RedisStore]) -> None:
    store = redis_live(lock_lease_s=1.0)
    other = redis_live(lock_lease_s=1.0, on_busy="reject")
    meta = new_meta()
    await store.create(meta)
    async with store.lock(meta.session_id):
        key = store._key(meta.session_id, "lock")
        for _ in range(6):  # 3 s: three leases
            assert 0 < await store.redis.pttl(key) <= 1000
            with pytest.raises(SessionBusy):
                async with other.lock(meta.session_id):
                    pass
            await asyncio.sleep(0.5)


# -- store outages: JSON 503 with Retry-After, /readyz names the part ---------------------------------------


async def test_redis_down_is_a_json_503_and_readyz_names_the_store(
    services_factory: Callable[..., Services], tmp_path: Path
) -> None:
    redis_server = PrivateRedis(tmp_path)  # not started yet: nothing listens on its port
    services = services_factory(
        redis={"url": redis_server.url}, auth={"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}}
    )
    try:
        async with serving(services) as http:
            created = await http.post("/v1/sessions")
            assert created.status_code == 503
            assert created.headers["content-type"] == "application/json"
            assert int(created.headers["Retry-After"]) >= 1
            assert "session store is unavailable" in created.json()["detail"]
            chat = await http.post("/v1/sessions/whatever/chat", json={"question": "发票怎么开？"})
            assert chat.status_code == 503 and "Retry-After" in chat.headers
            ready = await http.get("/readyz")
            assert ready.status_code == 503
            checks = ready.json()["checks"]
            assert checks["store"].startswith("error") and checks["archive"] == "ok" and checks["qdrant"] == "ok"
            # Redis comes up: the next request works, no stale state.
            await redis_server.start()
            sid = (await http.post("/v1/sessions")).json()["session_id"]
            assert (await http.post(f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？"})).status_code == 200
            assert (await http.get("/readyz")).json()["checks"]["store"] == "ok"
    finally:
        redis_server.kill()


async def test_archive_down_keeps_turns_going_and_readyz_names_the_archive(
    services_factory: Callable[..., Services], tmp_path: Path
) -> None:
    services = services_factory(
        auth={"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}}, database={"flush_retry_max_s": 0.2}
    )
    store = write_behind(services.store)
    assert isinstance(store, ArchivedStore)
    real = store.archive
    store.archive = DownArchive(real)  # type: ignore[assignment]

    async def down() -> None:
        raise StoreUnavailable("archive", "connection refused")

    real.ping = down  # type: ignore[method-assign]
    async with serving(services) as http:
        sid = (await http.post("/v1/sessions")).json()["session_id"]
        answer = await http.post(f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？"})
        assert answer.status_code == 200  # the write-behind queues; the turn does not wait for the archive
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert checks["store"] == "ok" and checks["archive"].startswith("error")
        assert "rag_archive_backlog_sessions 1.0" in (await http.get("/metrics")).text
        # A session the live store lost cannot be restored now: 503, not 500 and not 404.
        assert isinstance(store.live, MemoryStore)
        store.live.clear()
        lost = await http.get(f"/v1/sessions/{sid}/messages")
        assert lost.status_code == 503 and "archive is unavailable" in lost.json()["detail"]
        store.archive = real  # the database is back
        await store.flush()
        assert "rag_archive_backlog_sessions 0.0" in (await http.get("/metrics")).text
        restored = await http.get(f"/v1/sessions/{sid}/messages")
        assert [m["role"] for m in restored.json()["messages"]] == ["user", "assistant"]


# -- Redis killed and restarted under concurrent load --------------------------------------------------------


def _pairs(messages: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(q, a) for (r1, q), (r2, a) in itertools.pairwise(messages) if (r1, r2) == ("user", "assistant")]


def _is_subsequence(needles: Sequence[Any], haystack: Sequence[Any]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


async def test_acknowledged_turns_survive_redis_restarts_under_load(
    services_factory: Callable[..., Services], fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Clients converse concurrently (plain and streamed turns) while Redis is killed (-9, no disk copy)
    and restarted three times. Every turn a client got an answer for is afterwards in the live store and
    the archive, in order, and both hold the same conversation; every failure meanwhile was a JSON 503."""
    clients, cycles = 4, 3
    async with PrivateRedis(tmp_path) as redis_server, fresh_database("postgresql", tmp_path) as db_url:
        services = services_factory(
            llm={"base_url": fake_llm.base_url, "max_retries": 0},
            redis={"url": redis_server.url},
            database={"url": db_url, "flush_interval_s": 0.01, "flush_retry_max_s": 0.2},
            memory={"strategy": "hybrid", "window_rounds": 1, "summary_trigger": "rounds", "summary_every_rounds": 2},
            rewrite={"mode": "none"},
            auth={"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
        )
        store = write_behind(services.store)
        assert isinstance(store, ArchivedStore)
        acked: dict[str, list[tuple[str, str]]] = {}
        statuses: Counter[int] = Counter()
        failures_since_kill = asyncio.Event()
        progress = asyncio.Condition()
        stop = asyncio.Event()

        async def acknowledged() -> int:
            return sum(len(v) for v in acked.values())

        async with serving(services, timeout=60) as http:

            def failed(resp: httpx.Response) -> None:
                statuses[resp.status_code] += 1
                assert resp.status_code == 503, resp.text
                assert resp.headers["content-type"] == "application/json" and int(resp.headers["Retry-After"]) >= 1
                failures_since_kill.set()

            async def converse(i: int) -> None:
                while (resp := await http.post("/v1/sessions")).status_code != 201:
                    failed(resp)
                    await asyncio.sleep(0.02)
                sid = resp.json()["session_id"]
                acked[sid] = []
                n = 0
                while not stop.is_set():
                    question = f"客户{i}第{n}问：发票怎么开？"
                    streamed = n % 3 == 2
                    resp = await http.post(f"/v1/sessions/{sid}/chat", json={"question": question, "stream": streamed})
                    answer: str | None = None
                    if resp.status_code == 200 and streamed:
                        events = sse_events(resp.text)
                        if events and events[-1][0] == "done":
                            answer = events[-1][1]["answer"]
                        else:
                            assert events[-1][0] == "error" and events[-1][1]["status"] == 503, events[-1]
                            failures_since_kill.set()
                    elif resp.status_code == 200:
                        answer = resp.json()["answer"]
                    else:
                        failed(resp)
                    if answer is None:
                        await asyncio.sleep(0.02)
                        continue
                    statuses[200] += 1
                    async with progress:
                        acked[sid].append((question, answer))
                        progress.notify_all()
                    n += 1

            async def wait_for_acks(count: int) -> None:
                async with progress:
                    await asyncio.wait_for(progress.wait_for(lambda: sum(map(len, acked.values())) >= count), 120)

            tasks = [asyncio.create_task(converse(i)) for i in range(clients)]
            try:
                for _ in range(cycles):
                    await wait_for_acks(await acknowledged() + 2 * clients)
                    failures_since_kill.clear()
                    redis_server.kill()
                    await asyncio.wait_for(failures_since_kill.wait(), 60)
                    await redis_server.start()
                    # Stale pooled connections recover at once: the first request after Redis is back works.
                    assert (await http.post("/v1/sessions")).status_code == 201
                await wait_for_acks(await acknowledged() + 2 * clients)
            finally:
                stop.set()
                await asyncio.gather(*tasks)

            await services.pipeline.drain()  # compressions still running write summaries
            await store.flush()
            archive = Archive(db_url)
            try:
                for sid, turns in acked.items():
                    listed = await http.get(f"/v1/sessions/{sid}/messages")  # restores it if Redis lost it
                    assert listed.status_code == 200
                    live_meta = (await store.live.peek([sid]))[sid]
                    assert isinstance(live_meta, SessionMeta)
                    live = [(m.role, m.content) for m in await store.live.messages(sid)]
                    found = await archive.load(sid)
                    assert found is not None
                    archive_meta, rows = found
                    assert [(m.role, m.content) for m in rows] == live  # one conversation, not two
                    assert _is_subsequence(turns, _pairs(live)), (turns, live)
                    assert 0 <= live_meta.summarized <= live_meta.message_count == len(live)
                    assert 0 <= archive_meta.summarized <= archive_meta.message_count
                    raw = await _raw_meta(archive, sid)
                    assert raw == (live_meta.summarized, live_meta.topic_start)  # not merely clamped on load
            finally:
                await archive.close()
        assert statuses[200] >= (cycles + 1) * 2 * clients
        assert set(statuses) <= {200, 503}
        assert store.restored >= clients  # the restarts did lose the live copies


async def _raw_meta(archive: Archive, session_id: str) -> tuple[int, int]:
    async with archive.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text("SELECT summarized, topic_start FROM sessions WHERE session_id = :s"), {"s": session_id}
            )
        ).one()
    return int(row[0]), int(row[1])
