"""The write-behind reads the archive's last seq inside its write transaction only (no read of its own
before it), and still fills a gap that writes lost with a crashed process left behind."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.archive import Archive, migrate
from rag_service.sessions.interface import AlsoWrite, ArchiveWrite, GapFill, new_session_id
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.writebehind import ArchivedStore
from tests.servers import DIALECTS, fresh_database


@pytest.fixture(params=DIALECTS)
async def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with fresh_database(request.param, tmp_path) as url:
        migrate(url)
        yield url


class CountingArchive:
    """An archive that records which last seqs were asked for apart from a write, and the gaps filled."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self.asked: list[list[str]] = []
        self.filled: list[tuple[str, int, int]] = []

    async def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        self.asked.append(list(session_ids))
        return await self.archive.max_seqs(session_ids)

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        async def counted(session_id: str, start: int, stop: int) -> Sequence[Message]:
            self.filled.append((session_id, start, stop))
            assert fill is not None
            return await fill(session_id, start, stop)

        return await self.archive.write_batch(writes, counted if fill is not None else None, also=also)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


def _turn(label: str) -> list[Message]:
    now = time.time()
    return [Message("user", f"Can the lamp {label} be dimmed?", 7, now), Message("assistant", "Yes.", 2, now)]


async def test_flushes_read_no_max_of_their_own(archive_url: str) -> None:
    archive = CountingArchive(Archive(archive_url))
    store = ArchivedStore(MemoryStore(60, 5.0, "wait"), archive, flush_interval_s=60)
    meta = SessionMeta(session_id=new_session_id(16), created_at=time.time())
    try:
        await store.create(meta)
        await store.append(meta.session_id, _turn("A"))
        await store.flush()
        await store.append(meta.session_id, _turn("B"))
        await store.flush()
        assert archive.asked == [] and archive.filled == []
        stored = await archive.archive.load(meta.session_id)
        assert stored is not None and [m.content for m in stored[1]] == [m.content for m in _turn("A") + _turn("B")]
    finally:
        await store.close()


async def test_a_gap_is_filled_from_the_live_store(archive_url: str) -> None:
    archive = CountingArchive(Archive(archive_url))
    store = ArchivedStore(MemoryStore(60, 5.0, "wait"), archive, flush_interval_s=60)
    meta = SessionMeta(session_id=new_session_id(16), created_at=time.time())
    turns = [_turn(label) for label in "ABC"]
    try:
        await store.create(meta)
        await store.append(meta.session_id, turns[0])
        await store.flush()
        await store.append(meta.session_id, turns[1])
        store._pending.clear()  # a crashed process lost these queued writes
        await store.append(meta.session_id, turns[2])
        await store.flush()
        assert archive.filled == [(meta.session_id, 2, 4)]
        stored = await archive.archive.load(meta.session_id)
        assert stored is not None
        assert [m.content for m in stored[1]] == [m.content for t in turns for m in t]
        assert await archive.archive.max_seqs([meta.session_id]) == {meta.session_id: 5}
    finally:
        await store.close()
