"""The write-behind reads the archive's last seq only for batches that could leave a gap: a new session's
first batch starts at seq 0 and cannot."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.archive import Archive
from rag_service.sessions.interface import new_session_id
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.writebehind import ArchivedStore


class CountingArchive:
    """An archive that records which sessions' last seqs were asked for."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self.asked: list[list[str]] = []

    async def max_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        self.asked.append(list(session_ids))
        return await self.archive.max_seqs(session_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


def _turn(label: str) -> list[Message]:
    now = time.time()
    return [Message("user", f"Can the lamp {label} be dimmed?", 7, now), Message("assistant", "Yes.", 2, now)]


async def test_first_batch_reads_no_max_and_later_ones_do(sqlite_url: str) -> None:
    archive = CountingArchive(Archive(sqlite_url))
    store = ArchivedStore(MemoryStore(60, 5.0, "wait"), archive, flush_interval_s=60)  # type: ignore[arg-type]
    meta = SessionMeta(session_id=new_session_id(16), created_at=time.time())
    try:
        await store.create(meta)
        await store.append(meta.session_id, _turn("A"))
        await store.flush()
        assert all(meta.session_id not in asked for asked in archive.asked)
        await store.append(meta.session_id, _turn("B"))
        await store.flush()
        assert [meta.session_id] in archive.asked
        _, messages, _ = await store.load(meta.session_id, lambda m: 0)
        assert [m.content for m in messages] == [m.content for m in _turn("A") + _turn("B")]
        stored = await archive.archive.load(meta.session_id)
        assert stored is not None and [m.content for m in stored[1]] == [m.content for m in messages]
    finally:
        await store.close()
