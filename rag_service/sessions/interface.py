"""What every session store promises, and what the write-behind needs from the archive.

Every store keeps all messages of a session (the memory strategy only chooses what to send), the
running summary and metadata, with a TTL refreshed on every turn, and serialises the turns of one
session with a per-session lock. The errors here are the store's whole vocabulary towards its callers:
the API maps them to 404 / 409 / 503.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, runtime_checkable

from rag_service.domain import Message, SessionMeta

DELETED: Literal["deleted"] = "deleted"

Probe = tuple[str, Callable[[], Awaitable[None]]]


class SessionNotFound(KeyError):
    pass


class SessionIncomplete(SessionNotFound):
    """The live store holds the session's metadata but not all of its messages (e.g. a Redis eviction)."""


class SessionBusy(RuntimeError):
    pass


class StoreUnavailable(RuntimeError):
    """A part that holds sessions cannot be reached: `part` is "store" (the live store) or "archive"."""

    def __init__(self, part: str, detail: str) -> None:
        super().__init__(f"the {'session store' if part == 'store' else 'archive'} is unavailable: {detail}")
        self.part = part


_P = ParamSpec("_P")
_R = TypeVar("_R")


def outage_as_unavailable(
    part: str, errors: tuple[type[BaseException], ...]
) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Coroutine[Any, Any, _R]]]:
    """Decorator: `errors` (a client library's connection failures) leave the method as StoreUnavailable."""

    def wrap(fn: Callable[_P, Awaitable[_R]]) -> Callable[_P, Coroutine[Any, Any, _R]]:
        @functools.wraps(fn)
        async def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return await fn(*args, **kwargs)
            except errors as exc:
                raise StoreUnavailable(part, f"{type(exc).__name__}: {exc}"[:300]) from exc

        return call

    return wrap


def new_session_id(random_bytes: int, tenant: str = "", user: str = "") -> str:
    token = secrets.token_urlsafe(random_bytes)
    prefix = "".join(f"{p}:" for p in (tenant, user) if p)
    return prefix + token


async def acquire_within(lock: asyncio.Lock, timeout: float, session_id: str) -> None:
    """lock.acquire() within `timeout`, else SessionBusy; never leaves the lock held on a timeout that
    races the acquisition (which `wait_for` can do on Python 3.11)."""
    acquired = False
    try:
        async with asyncio.timeout(timeout):
            await lock.acquire()
            acquired = True
    except TimeoutError as exc:
        if acquired:
            lock.release()
        raise SessionBusy(session_id) from exc


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    expected_summarized: int
    summary: str
    summary_tokens: int
    summarized: int
    source_tokens: int


class SessionStore(Protocol):
    async def create(self, meta: SessionMeta) -> None: ...

    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        """Meta, the messages from `start_of(meta)` on, and that start index; refreshes the TTL."""
        ...

    async def append(self, session_id: str, messages: Sequence[Message]) -> int: ...

    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        """Applies only if nobody compressed since `expected_summarized` was read."""
        ...

    async def set_topic_start(self, session_id: str, index: int) -> None: ...

    async def set_task(self, session_id: str, task: str) -> None:
        """Stores the session's task state (JSON, rag_service.intents)."""
        ...

    async def messages(self, session_id: str) -> list[Message]: ...

    async def delete(self, session_id: str) -> bool: ...

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Serialises the turns of a session; released on every exit (error, cancellation)."""
        ...

    async def ping(self) -> None: ...

    def probes(self) -> list[Probe]:
        """Readiness checks by part ("store", "archive"), so /readyz can say which one is down."""
        ...

    async def start(self) -> None:
        """Work that needs the event loop, once, before the first request (nothing for most stores)."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class SessionCatalog(Protocol):
    """A store that can list a tenant's sessions (the archived store; a bare live store cannot)."""

    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]: ...


class LiveStore(SessionStore, Protocol):
    """A session store that can sit in front of the archive."""

    async def restore(self, meta: SessionMeta, messages: Sequence[Message]) -> bool:
        """Puts a session back (TTL fresh) unless the store holds it complete (someone restored it
        first); True if it was written. Replaces an incomplete copy (SessionIncomplete). Raises
        SessionNotFound if the session was deleted recently (a restore racing a delete)."""
        ...

    async def peek(self, session_ids: Sequence[str]) -> dict[str, SessionMeta | Literal["deleted"] | None]:
        """Current meta of each session, DELETED if it was deleted recently, None if absent; no TTL refresh."""
        ...

    async def peek_messages(self, session_id: str, start: int, stop: int) -> list[Message]:
        """messages[start:stop] without refreshing the TTL (empty if the session is absent)."""
        ...

    async def evict(self, session_id: str) -> None:
        """Drops the live copy (no tombstone): the next use restores the session from the archive."""
        ...


# messages[start:stop] of a session, as far as the caller still has them (the live store's peek_messages).
GapFill = Callable[[str, int, int], Awaitable[Sequence[Message]]]


@dataclass(frozen=True, slots=True)
class ArchiveWrite:
    """What the write-behind sends to the archive for one session: its meta (when known) and messages by seq."""

    session_id: str
    meta: SessionMeta | None
    messages: tuple[tuple[int, Message], ...] = ()


# More of a flush's transaction: statements another table of the archive database runs on the same
# connection (rag_service.feedback's turn receipts), so a turn's writes commit together.
AlsoWrite = Callable[[Any], Awaitable[None]]


class Rider(Protocol):
    """Rows another table keeps queued for the archive database, written in the write-behind's next
    transaction instead of one of their own."""

    def board(self) -> tuple[AlsoWrite, Callable[[BaseException | None], None]] | None:
        """The queued rows' write (run inside the transaction, called again if the transaction is
        retried), and what to call with the transaction's outcome (None: committed); None when
        nothing is queued. The rows are taken: the rider does not write them itself meanwhile."""
        ...


class SessionArchive(Protocol):
    """The durable side (rag_service.sessions.archive.Archive implements it)."""

    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]: ...

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        """Idempotent: upserts each meta, inserts the messages not stored yet. A message whose seq holds
        a different message is stored after the session's last seq, never dropped; returns the sessions
        where that happened (their live copies are stale). A write whose first seq lies beyond the
        session's last stored seq + 1 (writes lost with a crashed process) gets the missing messages
        from `fill(session_id, start, stop)` (those it has) before it is stored. `also` runs in the
        same transaction, after the messages."""
        ...

    async def load(self, session_id: str) -> tuple[SessionMeta, list[Message]] | None: ...

    async def delete(self, session_id: str) -> bool: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
