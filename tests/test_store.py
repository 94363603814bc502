"""Session stores: one contract for the in-process and the Redis live store, alone and behind the archive;
per-session locking; TTLs; write-behind and restore; PII masking on the way in.

Real Redis (random key prefix per test), SQLite, PostgreSQL and MariaDB (fresh databases): see servers.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import sqlalchemy as sa
from redis.asyncio.connection import Connection

from rag_core.settings import DatabaseSettings, PrivacySettings, RedisSettings, Settings
from rag_service.domain import Message, SessionMeta
from rag_service.privacy import Masker
from rag_service.sessions.archive import Archive, migrate
from rag_service.sessions.build import build_store
from rag_service.sessions.interface import (
    AlsoWrite,
    ArchiveWrite,
    GapFill,
    LiveStore,
    SessionBusy,
    SessionCatalog,
    SessionIncomplete,
    SessionNotFound,
    SessionStore,
    SummaryUpdate,
    new_session_id,
)
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.live_redis import RedisStore
from rag_service.sessions.masking import MaskedStore, masked
from rag_service.sessions.writebehind import ArchivedStore
from tests.servers import DIALECTS, REDIS_URL, fresh_database, redis_prefix

KINDS = ["memory", "redis", "archived-memory", "archived-redis"]


def msg(role: str, text: str) -> Message:
    return Message(role, text, len(text), time.time())  # type: ignore[arg-type]


def turn(i: int) -> list[Message]:
    return [msg("user", f"问题 {i}：iPhone 16 Pro 多少钱？🙂"), msg("assistant", f"回答 {i}：7999 元起。")]


def new_meta(user: str = "") -> SessionMeta:
    return SessionMeta(session_id=new_session_id(16, user=user), created_at=time.time(), user=user)


@dataclass
class Env:
    """Builds stores of one kind for a test; stores built by one Env share Redis keys and the archive,
    like several processes of one deployment would."""

    kind: str
    tmp: Path
    archive_url: str = ""
    redis: aioredis.Redis | None = None
    prefix: str = ""
    opened: list[SessionStore] = field(default_factory=list)
    archives: list[Archive] = field(default_factory=list)

    def live(self, ttl_s: int, lock_timeout_s: float, on_busy: str) -> LiveStore:
        if "redis" in self.kind:
            assert self.redis is not None
            return RedisStore(
                REDIS_URL, ttl_s=ttl_s, lock_timeout_s=lock_timeout_s, on_busy=on_busy, prefix=self.prefix
            )
        return MemoryStore(ttl_s, lock_timeout_s, on_busy)

    def archive(self, key: str | None = None) -> Archive:
        archive = Archive(self.archive_url, key)
        self.archives.append(archive)
        return archive

    def make(
        self,
        *,
        ttl_s: int = 60,
        lock_timeout_s: float = 5.0,
        on_busy: str = "wait",
        masker: Masker | None = None,
        flush_interval_s: float = 0.02,
        archive: Any = None,
    ) -> Any:
        live = self.live(ttl_s, lock_timeout_s, on_busy)
        store: SessionStore = live
        if self.kind.startswith("archived"):
            store = ArchivedStore(live, archive or Archive(self.archive_url), flush_interval_s=flush_interval_s)
        if masker is not None:
            store = masked(store, masker, count_tokens=len)
        self.opened.append(store)
        return store

    async def lose_live(self, store: Any, session_id: str, *, messages_only: bool = False) -> None:
        """What an expiry, an eviction or a FLUSHDB does to the live copy of one session."""
        live = store.live if isinstance(store, ArchivedStore) else store
        if isinstance(live, RedisStore):
            meta_key, msgs_key = live.keys(session_id)
            await live.redis.delete(*([msgs_key] if messages_only else [meta_key, msgs_key]))
        elif isinstance(live, MemoryStore) and messages_only:
            live._entries[session_id].messages.clear()
        elif isinstance(live, MemoryStore):
            live._entries.pop(session_id)


@pytest.fixture
async def env_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """env_factory(kind, dialect="sqlite") -> Env; everything it opened is closed afterwards."""
    envs: list[Env] = []
    stack: list[Any] = []

    async def make(kind: str, dialect: str = "sqlite") -> Env:
        env = Env(kind, tmp_path)
        if "redis" in kind:
            redis_ctx = redis_prefix()
            env.redis, env.prefix = await redis_ctx.__aenter__()
            stack.append(redis_ctx)
        if kind.startswith("archived"):
            db_ctx = fresh_database(dialect, tmp_path)
            env.archive_url = await db_ctx.__aenter__()
            stack.append(db_ctx)
            migrate(env.archive_url)
        envs.append(env)
        return env

    yield make
    for env in envs:
        for store in env.opened:
            await store.close()
        for archive in env.archives:
            await archive.close()
    for ctx in reversed(stack):
        await ctx.__aexit__(None, None, None)


@pytest.fixture(params=KINDS)
async def env(request: pytest.FixtureRequest, env_factory: Callable[..., Any]) -> Env:
    result: Env = await env_factory(request.param)
    return result


# -- the contract, on every kind ----------------------------------------------------------------


async def test_create_load_append_keeps_order_and_values(env: Env) -> None:
    store = env.make()
    meta = new_meta(user="u1")
    await store.create(meta)
    got, loaded, start = await store.load(meta.session_id, lambda m: 0)
    assert (got.session_id, got.user, got.created_at, got.message_count, loaded, start) == (
        meta.session_id,
        "u1",
        meta.created_at,
        0,
        [],
        0,
    )
    sent: list[Message] = []
    for i in range(3):
        sent += turn(i)
        assert await store.append(meta.session_id, sent[-2:]) == len(sent)
    dangling = msg("user", "没有回答的问题")
    assert await store.append(meta.session_id, [dangling]) == 7
    sent.append(dangling)
    got, loaded, start = await store.load(meta.session_id, lambda m: m.message_count - 3)
    assert got.message_count == 7 and start == 4 and loaded == sent[4:]
    assert await store.messages(meta.session_id) == sent  # content, tokens and float timestamps exact


async def test_summary_is_compare_and_set(env: Env) -> None:
    store = env.make()
    meta = new_meta()
    await store.create(meta)
    for i in range(3):
        await store.append(meta.session_id, turn(i))
    first = SummaryUpdate(
        expected_summarized=0, summary="用户问了价格", summary_tokens=9, summarized=2, source_tokens=30
    )
    assert await store.update_summary(meta.session_id, first)
    # A second compressor that read the session before the first one finished loses.
    assert not await store.update_summary(meta.session_id, first)
    second = SummaryUpdate(
        expected_summarized=2, summary="价格和颜色", summary_tokens=7, summarized=4, source_tokens=25
    )
    assert await store.update_summary(meta.session_id, second)
    got, loaded, start = await store.load(meta.session_id, lambda m: m.summarized)
    assert (got.summary, got.summary_tokens, got.summarized, got.summarized_source_tokens) == ("价格和颜色", 7, 4, 55)
    assert start == 4 and len(loaded) == 2


async def test_topic_start(env: Env) -> None:
    store = env.make()
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, turn(0))
    await store.set_topic_start(meta.session_id, 2)
    got, _, _ = await store.load(meta.session_id, lambda m: 0)
    assert got.topic_start == 2


async def test_task_state(env: Env) -> None:
    store = env.make()
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, turn(0))
    await store.set_task(meta.session_id, '{"intent": "order_status", "slots": {"order_no": "XC20250301000123"}}')
    got, _, _ = await store.load(meta.session_id, lambda m: 0)
    assert got.task == '{"intent": "order_status", "slots": {"order_no": "XC20250301000123"}}'
    with pytest.raises(SessionNotFound):
        await store.set_task(new_session_id(16), "{}")


async def test_delete(env: Env) -> None:
    store = env.make()
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, turn(0))
    assert await store.delete(meta.session_id)
    with pytest.raises(SessionNotFound):
        await store.load(meta.session_id, lambda m: 0)
    assert not await store.delete(meta.session_id)


async def test_unknown_session(env: Env) -> None:
    store = env.make()
    sid = new_session_id(16)
    update = SummaryUpdate(0, "s", 1, 2, 3)
    for call in (
        store.load(sid, lambda m: 0),
        store.append(sid, turn(0)),
        store.update_summary(sid, update),
        store.set_topic_start(sid, 0),
        store.messages(sid),
    ):
        with pytest.raises(SessionNotFound):
            await call
    assert not await store.delete(sid)


async def test_concurrent_turns_of_one_session_run_one_after_the_other(env: Env) -> None:
    store = env.make()
    meta = new_meta()
    await store.create(meta)

    async def one_turn(i: int) -> None:
        async with store.lock(meta.session_id):
            _, loaded, _ = await store.load(meta.session_id, lambda m: 0)
            await asyncio.sleep(0.002)  # let the others run while this turn is "generating"
            await store.append(meta.session_id, [msg("user", f"q{i} saw {len(loaded)}"), msg("assistant", f"a{i}")])

    await asyncio.gather(*(one_turn(i) for i in range(20)))
    stored = await store.messages(meta.session_id)
    assert len(stored) == 40
    seen = set()
    for k in range(20):
        question, answer = stored[2 * k], stored[2 * k + 1]
        i = int(question.content.split()[0][1:])
        # Pairs are adjacent, and each turn saw exactly the turns before it.
        assert (question.role, answer.role, answer.content) == ("user", "assistant", f"a{i}")
        assert question.content == f"q{i} saw {2 * k}"
        seen.add(i)
    assert seen == set(range(20))


async def _hold(store: Any, session_id: str, entered: asyncio.Event, release: asyncio.Event) -> None:
    async with store.lock(session_id):
        entered.set()
        await release.wait()


async def test_reject_mode_answers_busy(env: Env) -> None:
    # At once, not after lock_timeout_s: waiting an hour for the holder would trip the safety net below.
    store = env.make(on_busy="reject", lock_timeout_s=3600.0)
    meta = new_meta()
    await store.create(meta)
    entered, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(store, meta.session_id, entered, release))
    await entered.wait()

    async def try_lock() -> None:
        async with store.lock(meta.session_id):
            pass

    with pytest.raises(SessionBusy):
        await asyncio.wait_for(try_lock(), 60)
    assert not holder.done()  # busy while the holder still holds it
    release.set()
    await holder
    async with store.lock(meta.session_id):
        pass


async def test_wait_mode_gives_up_after_lock_timeout(env: Env) -> None:
    store = env.make(lock_timeout_s=0.3)
    meta = new_meta()
    await store.create(meta)
    entered, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(store, meta.session_id, entered, release))
    await entered.wait()
    loop = asyncio.get_running_loop()

    async def try_lock() -> None:
        async with store.lock(meta.session_id):
            pass

    started = loop.time()
    with pytest.raises(SessionBusy):
        await asyncio.wait_for(try_lock(), 60)  # a safety net: it must give up, not wait for the holder
    # It waited its lock_timeout_s first (a lower bound: a slower machine only makes the wait longer).
    assert loop.time() - started >= 0.3 - 0.01
    assert not holder.done()
    release.set()
    await holder


# -- TTL ----------------------------------------------------------------------------------------


class Clock:
    """Stands in for the `time` module of rag_service.sessions.live_memory: the in-process store's expiry clock, moved
    by the test instead of by waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("rag_service.sessions.live_memory.time", fake)
    return fake


async def _until_expired(store: RedisStore, session_id: str) -> None:
    """Redis expires keys on its own clock: wait for that (the deadline is only a safety net)."""

    async def gone() -> None:
        while await store.redis.exists(*store.keys(session_id)):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(gone(), 60)


async def test_memory_session_expires_after_ttl(env_factory: Callable[..., Any], clock: Clock) -> None:
    env = await env_factory("memory")
    store = env.make(ttl_s=1)
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, turn(0))
    clock.advance(0.9)
    _, loaded, _ = await store.load(meta.session_id, lambda m: 0)  # within its TTL (and refreshed)
    assert len(loaded) == 2
    clock.advance(1.1)
    with pytest.raises(SessionNotFound):
        await store.load(meta.session_id, lambda m: 0)


async def test_redis_session_expires_after_ttl(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    store: RedisStore = env.make(ttl_s=1)
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, turn(0))
    for key in store.keys(meta.session_id):
        assert 0 < await store.redis.pttl(key) <= 1000
    await _until_expired(store, meta.session_id)
    with pytest.raises(SessionNotFound):
        await store.load(meta.session_id, lambda m: 0)


async def test_memory_ttl_is_refreshed_on_every_turn(env_factory: Callable[..., Any], clock: Clock) -> None:
    env = await env_factory("memory")
    store = env.make(ttl_s=1)
    meta = new_meta()
    await store.create(meta)
    for i in range(4):  # 2.4 s in all, more than twice the TTL
        clock.advance(0.6)
        _, loaded, _ = await store.load(meta.session_id, lambda m: 0)
        assert len(loaded) == 2 * i
        await store.append(meta.session_id, turn(i))
    clock.advance(1.1)
    with pytest.raises(SessionNotFound):
        await store.load(meta.session_id, lambda m: 0)


async def test_redis_ttl_is_refreshed_on_every_turn(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    store: RedisStore = env.make(ttl_s=60)
    meta = new_meta()
    await store.create(meta)
    keys = store.keys(meta.session_id)
    for i in range(4):
        # Time has passed: most of the TTL is gone, and the turn gives it all back.
        for key in keys:
            await store.redis.pexpire(key, 5000)
        _, loaded, _ = await store.load(meta.session_id, lambda m: 0)
        assert len(loaded) == 2 * i
        await store.append(meta.session_id, turn(i))
        for key in keys:
            assert 5000 < await store.redis.pttl(key) <= 60_000


# -- Redis specifics ----------------------------------------------------------------------------


async def test_redis_layout_hash_list_and_ttls(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    store: RedisStore = env.make(ttl_s=300)
    meta = new_meta(user="alice")
    await store.create(meta)
    await store.append(meta.session_id, turn(0))
    meta_key, msgs_key = store.keys(meta.session_id)
    assert meta_key == f"{env.prefix}s:{{{meta.session_id}}}:meta"
    assert await store.redis.type(meta_key) == "hash" and await store.redis.type(msgs_key) == "list"
    fields = await store.redis.hgetall(meta_key)
    assert fields["message_count"] == "2" and fields["user"] == "alice"
    raw = await store.redis.lrange(msgs_key, 0, -1)
    assert json.loads(raw[0])["c"] == turn(0)[0].content and "\\u" not in raw[0]  # compact UTF-8 JSON
    for key in (meta_key, msgs_key):
        assert 295 <= await store.redis.ttl(key) <= 300


async def test_redis_lock_serialises_turns_across_processes(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    a, b = env.make(), env.make()  # two "processes": separate clients, pools and local queues
    meta = new_meta()
    await a.create(meta)

    async def one_turn(store: RedisStore, i: int) -> None:
        async with store.lock(meta.session_id):
            _, loaded, _ = await store.load(meta.session_id, lambda m: 0)
            await asyncio.sleep(0.002)
            await store.append(meta.session_id, [msg("user", f"q{i} saw {len(loaded)}"), msg("assistant", f"a{i}")])

    await asyncio.gather(*(one_turn(a if i % 2 else b, i) for i in range(20)))
    stored = await a.messages(meta.session_id)
    assert len(stored) == 40
    for k in range(20):
        assert stored[2 * k].content.endswith(f"saw {2 * k}")
        assert stored[2 * k + 1].content == "a" + stored[2 * k].content.split()[0][1:]


async def test_redis_reject_across_processes_and_lease_renewal(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    a: RedisStore = env.make(lock_timeout_s=2.0)
    b = env.make(lock_timeout_s=2.0, on_busy="reject")
    meta = new_meta()
    await a.create(meta)
    entered, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(a, meta.session_id, entered, release))
    await entered.wait()
    lock_key = f"{env.prefix}s:{{{meta.session_id}}}:lock"
    token = await a.redis.get(lock_key)

    async def renewed(last: int) -> int:
        """The lease's remaining ms once the holder has renewed it (it only counts down otherwise)."""
        while True:
            left = int(await a.redis.pttl(lock_key))
            assert left > 0, "the holder's lease ran out"
            if left > last:
                return left
            last = left
            await asyncio.sleep(0.02)

    left = int(await a.redis.pttl(lock_key))
    for _ in range(4):  # four renewals: well past the first 2 s lease
        left = await asyncio.wait_for(renewed(left), 60)
        assert await a.redis.get(lock_key) == token  # the same holder's lease, renewed
        with pytest.raises(SessionBusy):
            async with b.lock(meta.session_id):
                pass
    release.set()
    await holder
    async with b.lock(meta.session_id):
        pass


async def test_redis_lock_of_a_crashed_holder_expires(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    impatient: RedisStore = env.make(lock_timeout_s=0.3)
    store: RedisStore = env.make(lock_timeout_s=3600.0)
    meta = new_meta()
    await store.create(meta)
    lock_key = f"{env.prefix}s:{{{meta.session_id}}}:lock"
    # A process died holding the lock. While its lease lasts, nobody takes the lock over...
    await store.redis.set(lock_key, "dead-token", px=600_000)
    with pytest.raises(SessionBusy):
        async with impatient.lock(meta.session_id):
            pass
    assert await store.redis.get(lock_key) == "dead-token"
    # ...and once it runs out (here after 400 ms), the next turn proceeds without waiting its own
    # hour-long lock_timeout_s (the deadline below is only a safety net).
    await store.redis.pexpire(lock_key, 400)

    async def next_turn() -> str | None:
        async with store.lock(meta.session_id):
            return await store.redis.get(lock_key)

    holder = await asyncio.wait_for(next_turn(), 60)
    assert holder not in (None, "dead-token")


class CountingConnection(Connection):
    round_trips = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.round_trips += 1
        await super().send_packed_command(command, check_health)


async def test_redis_round_trips_per_turn(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("redis")
    pool = aioredis.ConnectionPool.from_url(REDIS_URL, decode_responses=True, connection_class=CountingConnection)
    store = RedisStore(
        client=aioredis.Redis(connection_pool=pool), ttl_s=60, lock_timeout_s=5, on_busy="wait", prefix=env.prefix
    )
    env.opened.append(store)
    meta = new_meta()
    await store.create(meta)

    async def one_turn(i: int) -> dict[str, int]:
        counts = {}
        before = CountingConnection.round_trips
        async with store.lock(meta.session_id):
            counts["lock"] = CountingConnection.round_trips - before
            mark = CountingConnection.round_trips
            await store.load(meta.session_id, lambda m: max(0, m.message_count - 4))
            counts["load"] = CountingConnection.round_trips - mark
            mark = CountingConnection.round_trips
            await store.append(meta.session_id, turn(i))
            counts["append"] = CountingConnection.round_trips - mark
            mark = CountingConnection.round_trips
        counts["unlock"] = CountingConnection.round_trips - mark
        return counts

    await one_turn(0)  # loads the Lua scripts (EVALSHA -> NOSCRIPT -> SCRIPT LOAD) once per server
    await one_turn(1)
    counts = await one_turn(2)
    assert counts == {"lock": 1, "load": 2, "append": 1, "unlock": 1}, counts


# -- behind the archive: write-behind and restore -------------------------------------------------


async def _converse(store: Any, session_id: str, turns: Sequence[int]) -> None:
    for i in turns:
        async with store.lock(session_id):
            await store.load(session_id, lambda m: 0)
            await store.append(session_id, turn(i))


async def _archived_rows(archive_url: str, session_id: str) -> list[tuple[int, str, str]]:
    archive = Archive(archive_url)
    try:
        async with archive.engine.connect() as conn:
            result = await conn.execute(
                sa.text("SELECT seq, role, content FROM messages WHERE session_id = :s ORDER BY seq"), {"s": session_id}
            )
            return [(int(r[0]), r[1], r[2]) for r in result.all()]
    finally:
        await archive.close()


@pytest.mark.parametrize(
    ("kind", "dialect"),
    [("archived-redis", d) for d in DIALECTS] + [("archived-memory", "sqlite")],
)
async def test_live_store_lost_mid_conversation_restores_from_archive(
    kind: str, dialect: str, env_factory: Callable[..., Any]
) -> None:
    env = await env_factory(kind, dialect)
    store: ArchivedStore = env.make()
    meta = new_meta(user="bob")
    await store.create(meta)
    await _converse(store, meta.session_id, range(3))
    await store.update_summary(meta.session_id, SummaryUpdate(0, "用户在问 iPhone 的价格", 12, 2, 40))
    await store.set_topic_start(meta.session_id, 4)
    await store.set_task(meta.session_id, '{"intent": "return_request", "slots": {"reason": "质量问题"}}')
    before_meta, before, _ = await store.load(meta.session_id, lambda m: 0)
    await store.flush()

    await env.lose_live(store, meta.session_id)  # Redis flushed / session expired
    after_meta, after, _ = await store.load(meta.session_id, lambda m: 0)
    assert store.restored == 1
    assert after == before
    assert after_meta == before_meta  # summary, counters, topic start, task state, user, created_at

    await _converse(store, meta.session_id, [3])  # the conversation goes on where it was
    await store.flush()
    rows = await _archived_rows(env.archive_url, meta.session_id)
    assert [r[0] for r in rows] == list(range(8))
    assert [r[2] for r in rows] == [m.content for m in [*before, *turn(3)]]


async def test_restore_includes_writes_not_yet_archived(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-redis")
    store: ArchivedStore = env.make(flush_interval_s=60)  # the write-behind has not run yet
    meta = new_meta()
    await store.create(meta)
    await _converse(store, meta.session_id, range(2))
    assert store.pending == 1
    await env.lose_live(store, meta.session_id)
    _, loaded, _ = await store.load(meta.session_id, lambda m: 0)
    assert [m.content for m in loaded] == [m.content for m in turn(0) + turn(1)]


async def test_expired_session_is_restored_on_its_next_turn(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-redis")
    store: ArchivedStore = env.make(ttl_s=1)
    meta = new_meta()
    await store.create(meta)
    await _converse(store, meta.session_id, [0])
    assert isinstance(store.live, RedisStore)
    await _until_expired(store.live, meta.session_id)
    await _converse(store, meta.session_id, [1])
    assert store.restored == 1
    assert len(await store.messages(meta.session_id)) == 4


@pytest.mark.parametrize("kind", ["archived-redis", "archived-memory"])
async def test_evicted_message_list_is_repaired_from_archive(kind: str, env_factory: Callable[..., Any]) -> None:
    env = await env_factory(kind)
    store: ArchivedStore = env.make()
    meta = new_meta()
    await store.create(meta)
    await _converse(store, meta.session_id, range(2))
    await store.flush()
    await env.lose_live(store, meta.session_id, messages_only=True)
    if kind == "archived-redis":
        with pytest.raises(SessionIncomplete):
            await store.live.load(meta.session_id, lambda m: 0)
    await _converse(store, meta.session_id, [2])
    assert [m.content for m in await store.messages(meta.session_id)] == [
        m.content for m in turn(0) + turn(1) + turn(2)
    ]


class FlakyArchive:
    """The archive, failing its first `failures` batch writes (database down)."""

    def __init__(self, archive: Archive, failures: int) -> None:
        self.archive, self.failures, self.calls = archive, failures, 0

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("archive unavailable")
        return await self.archive.write_batch(writes, fill, also=also)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


async def test_archive_outage_is_retried_without_duplicates(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-redis")
    flaky = FlakyArchive(Archive(env.archive_url), failures=2)
    store: ArchivedStore = env.make(archive=flaky, flush_interval_s=0.01)
    meta = new_meta()
    await store.create(meta)
    await _converse(store, meta.session_id, range(3))  # the turns do not notice the outage

    async def drained() -> None:
        while store.pending:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(drained(), 60)  # the write-behind retries on its own (a safety net only)
    assert flaky.calls >= 3 and not store.pending
    await store.flush()
    await flaky.archive.save_messages(meta.session_id, 0, turn(0))  # replayed batch: ignored
    rows = await _archived_rows(env.archive_url, meta.session_id)
    assert [r[0] for r in rows] == list(range(6))


async def test_gap_left_by_lost_writes_is_filled_from_live(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-redis")
    store: ArchivedStore = env.make(flush_interval_s=60)
    meta = new_meta()
    await store.create(meta)
    await _converse(store, meta.session_id, range(2))
    await store.flush()
    await _converse(store, meta.session_id, [2])
    store._pending.clear()  # a crashed process lost these queued writes
    await _converse(store, meta.session_id, [3])
    await store.flush()
    rows = await _archived_rows(env.archive_url, meta.session_id)
    assert [r[0] for r in rows] == list(range(8))


async def test_delete_removes_everywhere_even_with_writes_queued_elsewhere(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-redis")
    a: ArchivedStore = env.make(flush_interval_s=60)
    b: ArchivedStore = env.make(flush_interval_s=60)
    meta = new_meta()
    await a.create(meta)
    await _converse(a, meta.session_id, range(2))
    await a.flush()
    await _converse(a, meta.session_id, [2])  # queued in process a
    assert await b.delete(meta.session_id)  # deleted through process b
    await a.flush()  # a's queued writes must not bring the session back
    assert await env.archive().load(meta.session_id) is None
    assert await _archived_rows(env.archive_url, meta.session_id) == []
    with pytest.raises(SessionNotFound):
        await a.load(meta.session_id, lambda m: 0)


async def test_close_writes_what_is_queued(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-memory")
    store: ArchivedStore = env.make(flush_interval_s=60)
    meta = new_meta()
    await store.create(meta)
    await _converse(store, meta.session_id, range(2))
    assert store.pending
    await store.close()
    env.opened.remove(store)
    found = await (archive := env.archive()).load(meta.session_id)
    assert found is not None and len(found[1]) == 4
    await archive.close()


PII = (
    "我的手机13812345678，邮箱alice@example.com，身份证11010519491231002X，"
    "卡号6222021234567890128。订单XC20250301000123，客服热线400-820-1234。"  # a Luhn-valid card number
)
MASKED = (
    "我的手机138****5678，邮箱a***@example.com，身份证110105********002X，"
    "卡号***************0128。订单XC20250301000123，客服热线400-820-1234。"
)


async def test_pii_is_masked_before_redis_and_sql(env_factory: Callable[..., Any]) -> None:
    env = await env_factory("archived-redis")
    store: MaskedStore = env.make(masker=Masker())
    archived = store.inner
    assert isinstance(archived, ArchivedStore)
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, [msg("user", PII), msg("assistant", "好的，已记录 13812345678。")])
    await store.update_summary(meta.session_id, SummaryUpdate(0, "用户留了手机 13812345678", 20, 2, 50))
    await archived.flush()
    raw_redis = await archived.live.redis.lrange(archived.live.keys(meta.session_id)[1], 0, -1)  # type: ignore[attr-defined]
    assert json.loads(raw_redis[0])["c"] == MASKED
    assert json.loads(raw_redis[0])["t"] == len(MASKED)  # token count follows the stored text
    assert "13812345678" not in "".join(raw_redis)
    summary = await archived.live.redis.hget(archived.live.keys(meta.session_id)[0], "summary")  # type: ignore[attr-defined]
    assert summary == "用户留了手机 138****5678"
    await store.set_task(meta.session_id, '{"slots": {"phone": "13812345678"}}')
    task = await archived.live.redis.hget(archived.live.keys(meta.session_id)[0], "task")  # type: ignore[attr-defined]
    assert task == '{"slots": {"phone": "138****5678"}}'  # slots are masked like messages
    rows = await _archived_rows(env.archive_url, meta.session_id)
    assert rows[0][2] == MASKED and rows[1][2] == "好的，已记录 138****5678。"


async def test_masking_is_a_layer_over_any_store(env_factory: Callable[..., Any]) -> None:
    live = (await env_factory("memory")).make()
    store = masked(live, Masker(), count_tokens=len)
    assert not isinstance(store, SessionCatalog)  # a bare live store lists nothing, masked or not
    meta = new_meta()
    await store.create(meta)
    await store.append(meta.session_id, [msg("user", PII)])
    held = await live.messages(meta.session_id)
    assert [(m.content, m.tokens) for m in held] == [(MASKED, len(MASKED))]
    said = "用户的邮箱 alice@example.com"
    assert await store.update_summary(meta.session_id, SummaryUpdate(0, said, 20, 1, 50))
    summary = "用户的邮箱 a***@example.com"
    got, _, _ = await live.load(meta.session_id, lambda m: 0)
    assert (got.summary, got.summary_tokens) == (summary, 20 + len(summary) - len(said))
    archived = (await env_factory("archived-memory")).make()
    assert isinstance(masked(archived, Masker()), SessionCatalog)


# -- wiring -------------------------------------------------------------------------------------


async def test_build_store_composes_live_and_migrated_archive(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/wired/archive.db"
    embedded = build_store(Settings(database=DatabaseSettings(url=url)))
    assert isinstance(embedded, MaskedStore) and embedded.masker is not None  # privacy is on by default
    assert isinstance(embedded.inner, ArchivedStore) and isinstance(embedded.inner.live, MemoryStore)
    await embedded.ping()
    meta = new_meta()
    await embedded.create(meta)
    await embedded.append(meta.session_id, turn(0))
    await embedded.close()
    reopened = build_store(Settings(database=DatabaseSettings(url=url)))
    assert [m.content for m in await reopened.messages(meta.session_id)] == [m.content for m in turn(0)]
    await reopened.close()

    try:
        client = aioredis.Redis.from_url(REDIS_URL)
        await client.ping()
        await client.aclose()
    except (OSError, aioredis.ConnectionError):
        pytest.skip(f"Redis unreachable at {REDIS_URL}")
    with_redis = build_store(
        Settings(
            database=DatabaseSettings(url=url),
            redis=RedisSettings(url=REDIS_URL),
            privacy=PrivacySettings(enabled=False),
        )
    )
    assert isinstance(with_redis, ArchivedStore) and isinstance(with_redis.live, RedisStore)
    assert not isinstance(with_redis, MaskedStore)  # no masking layer with privacy off
    await with_redis.ping()
    await with_redis.close()
