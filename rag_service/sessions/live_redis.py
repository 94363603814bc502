"""The Redis live store.

Keys of a session (the braces are a Redis Cluster hash tag: all of a session's keys share a slot, so the
multi-key scripts and transactions below also work on a cluster):

    {prefix}s:{<id>}:meta   hash: the SessionMeta fields (summary, counters, topic_start ...)
    {prefix}s:{<id>}:msgs   list: one compact JSON object per message, oldest first
    {prefix}s:{<id>}:lock   the per-session turn lock (redis-py Lock: SET NX PX + Lua release)
    {prefix}s:{<id>}:del    tombstone after a delete, so queued archive writes are dropped

Nothing is read-modified-written on the client: appends are RPUSH, counters HSET/HINCRBY, and every
multi-key change is one Lua script or MULTI that also refreshes the TTL of both data keys.

Round trips of one turn: lock (1) + load (2: MULTI[HGETALL, LLEN, EXPIRE, EXPIRE], LRANGE) + append
(1: EVALSHA) + unlock (1) = 5, of which load + append = 3.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, cast

import anyio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError
from redis.exceptions import TimeoutError as RedisTimeoutError

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.interface import (
    DELETED,
    Probe,
    SessionBusy,
    SessionIncomplete,
    SessionNotFound,
    StoreUnavailable,
    SummaryUpdate,
    acquire_within,
    outage_as_unavailable,
)

log = logging.getLogger(__name__)

# Redis down, restarting (LOADING is a ConnectionError subclass) or a connection dropped: a 503.
_OUTAGES = (RedisConnectionError, RedisTimeoutError, OSError)
_available = outage_as_unavailable("store", _OUTAGES)

_INT_FIELDS = ("message_count", "summary_tokens", "summarized", "summarized_source_tokens", "topic_start")

# KEYS: meta, msgs. ARGV: ttl, message JSON ... Returns the new count, -1 (no session) or -2 (the list
# lost messages: eviction), without writing anything in the last two cases.
_APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local before = tonumber(redis.call('HGET', KEYS[1], 'message_count') or '0')
if redis.call('LLEN', KEYS[2]) ~= before then return -2 end
local n = before
if #ARGV > 1 then n = redis.call('RPUSH', KEYS[2], unpack(ARGV, 2)) end
redis.call('HSET', KEYS[1], 'message_count', n)
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return n
"""

# KEYS: meta, msgs. ARGV: ttl, expected_summarized, summary, summary_tokens, summarized, source_tokens.
# 0: someone compressed first; -3: the update folds messages the session does not hold.
_UPDATE_SUMMARY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if tonumber(redis.call('HGET', KEYS[1], 'summarized') or '0') ~= tonumber(ARGV[2]) then return 0 end
local count = tonumber(redis.call('HGET', KEYS[1], 'message_count') or '0')
if tonumber(ARGV[5]) > count or tonumber(ARGV[5]) < tonumber(ARGV[2]) then return -3 end
redis.call('HSET', KEYS[1], 'summary', ARGV[3], 'summary_tokens', ARGV[4], 'summarized', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'summarized_source_tokens', ARGV[6])
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""

# KEYS: meta, msgs. ARGV: ttl, index (clamped to the messages held).
_SET_TOPIC_START = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local count = tonumber(redis.call('HGET', KEYS[1], 'message_count') or '0')
redis.call('HSET', KEYS[1], 'topic_start', math.max(0, math.min(tonumber(ARGV[2]), count)))
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""

# KEYS: meta, msgs. ARGV: ttl, task JSON.
_SET_TASK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'task', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""

# KEYS: meta, msgs, tombstone. ARGV: ttl, number of meta pairs, field, value ..., message ...
# Writes nothing if the session is there and complete (0: someone else restored it first) or was
# deleted (-1: a restore racing a delete must not bring the session back).
_RESTORE = """
if redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
local count = redis.call('HGET', KEYS[1], 'message_count')
if count and redis.call('LLEN', KEYS[2]) == tonumber(count) then return 0 end
local pairs = tonumber(ARGV[2])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], unpack(ARGV, 3, 2 + 2 * pairs))
local i = 3 + 2 * pairs
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""


def encode_message(m: Message) -> str:
    return json.dumps(
        {"r": m.role, "c": m.content, "t": m.tokens, "at": m.created_at}, ensure_ascii=False, separators=(",", ":")
    )


def decode_message(raw: str | bytes) -> Message:
    d = json.loads(raw)
    return Message(d["r"], d["c"], int(d["t"]), float(d["at"]))


def encode_meta(meta: SessionMeta) -> dict[str, str]:
    return {k: repr(v) if isinstance(v, float) else str(v) for k, v in meta.to_dict().items()}


def decode_meta(fields: dict[str, str]) -> SessionMeta:
    meta = SessionMeta(
        session_id=fields["session_id"],
        created_at=float(fields.get("created_at", "0")),
        tenant=fields.get("tenant", ""),
        user=fields.get("user", ""),
        summary=fields.get("summary", ""),
        task=fields.get("task", ""),
    )
    for name in _INT_FIELDS:
        setattr(meta, name, int(fields.get(name, "0")))
    return meta


class _LocalLocks:
    """In-process queue in front of the Redis lock: waiters of one process line up on an asyncio.Lock
    (FIFO, no polling) and only the head polls Redis, for locks held by other processes."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def get(self, key: str) -> asyncio.Lock:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        return lock

    def put(self, key: str) -> None:
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)


class RedisStore:
    def __init__(
        self,
        url: str | None = None,
        *,
        ttl_s: int,
        lock_timeout_s: float,
        on_busy: str,
        lock_lease_s: float = 2.0,
        prefix: str = "rag:",
        client: aioredis.Redis | None = None,
        lock_poll_s: float = 0.05,
        tombstone_ttl_s: int = 86400,
        max_connections: int | None = None,
    ) -> None:
        if client is None:
            if not url:
                raise ValueError("RedisStore needs a URL or a client")
            client = aioredis.Redis.from_url(
                url,
                decode_responses=True,
                max_connections=max_connections,
                # A pooled connection that died with a Redis restart fails its next command; that command
                # is retried on a fresh connection at once, so a restart costs no request. A Redis that is
                # down fails a request within about a second (a 503), instead of after the client's default
                # ten retries.
                retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.2), retries=3),
                socket_connect_timeout=1.0,
                socket_timeout=10.0,
            )
        self.redis = client
        self.ttl_s, self.lock_timeout_s, self.on_busy = ttl_s, lock_timeout_s, on_busy
        self.lock_lease_s = lock_lease_s
        self.prefix, self.lock_poll_s, self.tombstone_ttl_s = prefix, lock_poll_s, tombstone_ttl_s
        self._append = client.register_script(_APPEND)
        self._update_summary = client.register_script(_UPDATE_SUMMARY)
        self._set_topic_start = client.register_script(_SET_TOPIC_START)
        self._set_task = client.register_script(_SET_TASK)
        self._restore = client.register_script(_RESTORE)
        self._local = _LocalLocks()

    def keys(self, session_id: str) -> tuple[str, str]:
        base = f"{self.prefix}s:{{{session_id}}}"
        return f"{base}:meta", f"{base}:msgs"

    def _key(self, session_id: str, suffix: str) -> str:
        return f"{self.prefix}s:{{{session_id}}}:{suffix}"

    # -- SessionStore ---------------------------------------------------------------------------

    @_available
    async def create(self, meta: SessionMeta) -> None:
        meta_key, msgs_key = self.keys(meta.session_id)
        fields = encode_meta(meta)
        fields["message_count"] = "0"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(meta_key, msgs_key, self._key(meta.session_id, "del"))
            pipe.hset(meta_key, mapping=cast("dict[Any, Any]", fields))
            pipe.expire(meta_key, self.ttl_s)
            await pipe.execute()

    @_available
    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        meta_key, msgs_key = self.keys(session_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(meta_key)
            pipe.llen(msgs_key)
            pipe.expire(meta_key, self.ttl_s)
            pipe.expire(msgs_key, self.ttl_s)
            fields, length, _, _ = await pipe.execute()
        if not fields:
            raise SessionNotFound(session_id)
        meta = decode_meta(fields)
        if length != meta.message_count:
            raise SessionIncomplete(session_id)
        start = max(0, min(start_of(meta), meta.message_count))
        raw = await self.redis.lrange(msgs_key, start, -1) if start < meta.message_count else []
        return meta, [decode_message(r) for r in raw], start

    @_available
    async def append(self, session_id: str, messages: Sequence[Message]) -> int:
        keys = self.keys(session_id)
        n = int(await self._append(keys=list(keys), args=[self.ttl_s, *(encode_message(m) for m in messages)]))
        if n == -1:
            raise SessionNotFound(session_id)
        if n == -2:
            raise SessionIncomplete(session_id)
        return n

    @_available
    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        args: list[str | int] = [
            self.ttl_s,
            update.expected_summarized,
            update.summary,
            update.summary_tokens,
            update.summarized,
            update.source_tokens,
        ]
        result = int(await self._update_summary(keys=list(self.keys(session_id)), args=args))
        if result == -1:
            raise SessionNotFound(session_id)
        if result == -3:
            log.warning(
                "summary update refused: it folds up to message %d, more than the session holds", update.summarized
            )
        return result == 1

    @_available
    async def set_topic_start(self, session_id: str, index: int) -> None:
        args: list[str | int] = [self.ttl_s, index]
        if int(await self._set_topic_start(keys=list(self.keys(session_id)), args=args)) == -1:
            raise SessionNotFound(session_id)

    @_available
    async def set_task(self, session_id: str, task: str) -> None:
        args: list[str | int] = [self.ttl_s, task]
        if int(await self._set_task(keys=list(self.keys(session_id)), args=args)) == -1:
            raise SessionNotFound(session_id)

    @_available
    async def messages(self, session_id: str) -> list[Message]:
        meta_key, msgs_key = self.keys(session_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(meta_key, "message_count")
            pipe.lrange(msgs_key, 0, -1)
            pipe.expire(meta_key, self.ttl_s)
            pipe.expire(msgs_key, self.ttl_s)
            count, raw, _, _ = await pipe.execute()
        if count is None:
            raise SessionNotFound(session_id)
        if len(raw) != int(count):
            raise SessionIncomplete(session_id)
        return [decode_message(r) for r in raw]

    @_available
    async def delete(self, session_id: str) -> bool:
        meta_key, msgs_key = self.keys(session_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(meta_key, msgs_key)
            pipe.set(self._key(session_id, "del"), "1", ex=self.tombstone_ttl_s)
            deleted, _ = await pipe.execute()
        return int(deleted) > 0

    # -- LiveStore ------------------------------------------------------------------------------

    @_available
    async def restore(self, meta: SessionMeta, messages: Sequence[Message]) -> bool:
        fields = encode_meta(meta)
        fields["message_count"] = str(len(messages))
        flat = [x for kv in fields.items() for x in kv]
        args: list[Any] = [self.ttl_s, len(fields), *flat, *(encode_message(m) for m in messages)]
        keys = [*self.keys(meta.session_id), self._key(meta.session_id, "del")]
        result = int(await self._restore(keys=keys, args=args))
        if result == -1:
            raise SessionNotFound(meta.session_id)
        return result == 1

    @_available
    async def peek(self, session_ids: Sequence[str]) -> dict[str, SessionMeta | Literal["deleted"] | None]:
        if not session_ids:
            return {}
        async with self.redis.pipeline(transaction=False) as pipe:
            for sid in session_ids:
                pipe.hgetall(self.keys(sid)[0])
                pipe.exists(self._key(sid, "del"))
            replies = await pipe.execute()
        out: dict[str, SessionMeta | Literal["deleted"] | None] = {}
        for i, sid in enumerate(session_ids):
            fields, tomb = replies[2 * i], replies[2 * i + 1]
            out[sid] = DELETED if tomb else decode_meta(fields) if fields else None
        return out

    @_available
    async def peek_messages(self, session_id: str, start: int, stop: int) -> list[Message]:
        if stop <= start:
            return []
        raw = await self.redis.lrange(self.keys(session_id)[1], start, stop - 1)
        return [decode_message(r) for r in raw]

    @_available
    async def evict(self, session_id: str) -> None:
        await self.redis.delete(*self.keys(session_id))

    # -- lock -----------------------------------------------------------------------------------

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        return self._lock(session_id)

    @asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        """Waits up to lock_timeout_s (or fails at once in reject mode) -> SessionBusy. The Redis lease is
        short (lock_lease_s) and renewed every third of it while the turn runs, so a long turn keeps its
        lock and the lock of a process that died expires within the lease. Released on every exit of the
        turn, a cancelled one included (client gone, server stopping)."""
        reject = self.on_busy == "reject"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lock_timeout_s
        key = self._key(session_id, "lock")
        local = self._local.get(key)
        try:
            if reject and local.locked():
                raise SessionBusy(session_id)
            await acquire_within(local, self.lock_timeout_s, session_id)
            try:
                lock = self.redis.lock(
                    key,
                    timeout=self.lock_lease_s,
                    sleep=self.lock_poll_s,
                    blocking=not reject,
                    blocking_timeout=max(0.0, deadline - loop.time()),
                    thread_local=False,
                )
                try:
                    acquired = await lock.acquire()
                except _OUTAGES as exc:
                    raise StoreUnavailable("store", f"{type(exc).__name__}: {exc}"[:300]) from exc
                if not acquired:
                    raise SessionBusy(session_id)
                stop = asyncio.Event()
                renew = loop.create_task(self._renew(lock, stop))
                try:
                    yield
                finally:
                    stop.set()
                    # Its own task, awaited under a shield: a cancelled turn (an anyio scope cancels every
                    # await inside it) would otherwise skip the release and leave the session locked
                    # until the lease ran out; a second asyncio cancel still cannot stop the release.
                    release = loop.create_task(self._release(lock, renew))
                    with anyio.CancelScope(shield=True):
                        await asyncio.shield(release)
            finally:
                local.release()
        finally:
            self._local.put(key)

    async def _release(self, lock: Any, renew: asyncio.Task[None]) -> None:
        renew.cancel()
        await asyncio.gather(renew, return_exceptions=True)
        try:
            await lock.release()
        except LockError:
            log.warning("a session lock expired before release (the event loop stalled past its lease?)")
        except Exception as exc:  # Redis unreachable: the lease ends the lock within lock_lease_s
            log.warning("could not release a session lock (it expires with its lease): %s", exc)

    async def _renew(self, lock: Any, stop: asyncio.Event) -> None:
        # Ends on `stop`, not only on cancel: redis-py can swallow a cancellation that arrives
        # mid-command, and a renewer that kept running would keep its turn's caller waiting.
        period = max(0.05, self.lock_lease_s / 3)
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), period)
                return
            except TimeoutError:
                pass
            try:
                await lock.reacquire()
            except LockError:
                if not stop.is_set():
                    log.warning("a session lock was lost while its turn was running")
                return
            except Exception as exc:  # Redis briefly unreachable: try again next period
                if not stop.is_set():
                    log.warning("could not renew a session lock: %s", exc)

    # -- lifecycle ------------------------------------------------------------------------------

    @_available
    async def ping(self) -> None:
        await self.redis.ping()

    def probes(self) -> list[Probe]:
        return [("store", self.ping)]

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        await self.redis.aclose()
