"""Turn receipts are written in batches: the turns answered within the window share one transaction, each
`record_turn` returns once its receipt is stored, and reads and deletes see receipts still queued."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from rag_service.domain import Message, SessionMeta
from rag_service.feedback import FeedbackStore, TurnRecord
from rag_service.privacy import Masker
from rag_service.sessions.archive import Archive, migrate_async
from rag_service.sessions.build import write_behind
from rag_service.sessions.interface import AlsoWrite, ArchiveWrite, GapFill
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.writebehind import ArchivedStore
from rag_service.wiring import Services


def _turn(mid: str, session: str = "gear:s1", answer: str = "Two years on the frame.") -> TurnRecord:
    receipt = {"rewrite": "skipped", "rounds_kept": 0, "compressed": False}
    return TurnRecord(
        mid, "gear", session, "How long is the bike frame covered?", answer, "q", "llm", [], receipt, time.time()
    )


class CountingArchive:
    """Counts the transactions the store opens on the archive's engine."""

    def __init__(self, store: FeedbackStore) -> None:
        self.transactions = 0
        original = store._write_rows

        async def counted(rows: list[dict[str, Any]]) -> None:
            self.transactions += 1
            await original(rows)

        store._write_rows = counted  # type: ignore[method-assign]


async def _archive(tmp_path: Path) -> Archive:
    url = f"sqlite+aiosqlite:///{tmp_path}/receipts.db"
    await migrate_async(url)
    return Archive(url)


async def _stored(archive: Archive) -> dict[str, str]:
    async with archive.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT message_id, answer FROM turn_receipts"))).all()
    return {str(m): str(a) for m, a in rows}


async def test_receipts_of_one_window_share_a_transaction(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    try:
        store = FeedbackStore(archive, batch_window_s=0.05)
        counter = CountingArchive(store)
        await asyncio.gather(*(store.record_turn(_turn(f"m{i}")) for i in range(5)))
        assert counter.transactions == 1
        assert set(await _stored(archive)) == {f"m{i}" for i in range(5)}
        # the same answer recorded twice in one batch: its latest receipt
        await asyncio.gather(store.record_turn(_turn("m9", answer="old")), store.record_turn(_turn("m9", answer="new")))
        assert (await _stored(archive))["m9"] == "new" and counter.transactions == 2
    finally:
        await archive.close()


async def test_reads_and_deletes_see_receipts_still_queued(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    try:
        store = FeedbackStore(archive, batch_window_s=30.0)  # the window never ends within the test
        pending = asyncio.create_task(store.record_turn(_turn("m1")))
        await asyncio.sleep(0)
        found = await store.turn("gear", "m1")
        assert found is not None and found.answer == "Two years on the frame."
        await pending

        gone = asyncio.create_task(store.record_turn(_turn("m2", session="gear:s2")))
        await asyncio.sleep(0)
        await store.forget_session("gear", "gear:s2")
        await gone
        assert "m2" not in await _stored(archive) and "m1" in await _stored(archive)
    finally:
        await archive.close()


async def test_a_failed_batch_fails_each_of_its_turns(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    store = FeedbackStore(archive, batch_window_s=0.01)
    await archive.close()
    async with archive.engine.begin() as conn:
        await conn.execute(sa.text("DROP TABLE turn_receipts"))
    results = await asyncio.gather(*(store.record_turn(_turn(f"m{i}")) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results)
    await archive.close()


async def test_each_text_of_the_sources_is_masked_as_a_message_is(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    try:
        store = FeedbackStore(archive, Masker(), batch_window_s=0.01)
        line = "Bike fitting by appointment:\n13812345678 (weekdays)"
        source = {"doc_id": "d1", "title": "Workshop", "text": line, "sentences": [line], "chunks": 1, "score": 0.91}
        turn = _turn("m1")
        await store.record_turn(TurnRecord(**{**_fields(turn), "sources": [source]}))
        found = await store.turn("gear", "m1")
        assert found is not None
        masked = "Bike fitting by appointment:\n138****5678 (weekdays)"
        assert found.sources == [{**source, "text": masked, "sentences": [masked]}]
    finally:
        await archive.close()


def _fields(turn: TurnRecord) -> dict[str, Any]:
    return {name: getattr(turn, name) for name in TurnRecord.__slots__}


class _FailingOnce:
    """The archive, its first batch write failing (a seq taken by another writer, the database gone)."""

    def __init__(self, archive: Archive) -> None:
        self.archive, self.calls = archive, 0

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("archive unavailable")
        return await self.archive.write_batch(writes, fill, also=also)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


async def _answered(store: ArchivedStore, session: str) -> None:
    await store.create(SessionMeta(session, time.time(), tenant="gear"))
    now = time.time()
    await store.append(
        session, [Message("user", "Frame warranty?", 4, now), Message("assistant", "Two years.", 3, now)]
    )


async def test_a_receipt_commits_with_its_turn_in_the_write_behind_transaction(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    sessions = ArchivedStore(MemoryStore(60, 1.0, "wait"), archive, flush_interval_s=0.02)
    try:
        receipts = FeedbackStore(archive, batch_window_s=30.0)  # its own window never ends within the test
        counter = CountingArchive(receipts)
        sessions.carry(receipts)
        await _answered(sessions, "gear:s1")
        await asyncio.wait_for(receipts.record_turn(_turn("m1")), 10)
        assert counter.transactions == 0 and set(await _stored(archive)) == {"m1"}
        assert (await archive.load("gear:s1")) is not None and not sessions.pending
        assert counter.transactions == 0
    finally:
        await sessions.close()


async def test_a_failed_write_behind_transaction_leaves_its_receipts_to_their_own(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    flaky = _FailingOnce(archive)
    sessions = ArchivedStore(MemoryStore(60, 1.0, "wait"), flaky, flush_interval_s=0.02)
    try:
        receipts = FeedbackStore(archive, batch_window_s=0.05)
        counter = CountingArchive(receipts)
        sessions.carry(receipts)
        await _answered(sessions, "gear:s1")
        await asyncio.wait_for(receipts.record_turn(_turn("m1")), 10)
        assert flaky.calls >= 1 and counter.transactions == 1 and set(await _stored(archive)) == {"m1"}
        await sessions.flush()  # the turn's messages: written by the write-behind's retry
        assert (await archive.load("gear:s1")) is not None
    finally:
        await sessions.close()


class _Gated:
    """The archive, each batch write held until `gate` is set."""

    def __init__(self, archive: Archive) -> None:
        self.archive, self.writing, self.gate = archive, asyncio.Event(), asyncio.Event()

    async def write_batch(
        self, writes: Sequence[ArchiveWrite], fill: GapFill | None = None, *, also: Sequence[AlsoWrite] = ()
    ) -> set[str]:
        self.writing.set()
        await self.gate.wait()
        return await self.archive.write_batch(writes, fill, also=also)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)


async def test_a_read_waits_for_receipts_riding_on_a_flush_in_flight(tmp_path: Path) -> None:
    archive = await _archive(tmp_path)
    gated = _Gated(archive)
    sessions = ArchivedStore(MemoryStore(60, 1.0, "wait"), gated, flush_interval_s=0.02)
    try:
        receipts = FeedbackStore(archive, batch_window_s=30.0)
        counter = CountingArchive(receipts)
        sessions.carry(receipts)
        await _answered(sessions, "gear:s1")
        recorded = asyncio.create_task(receipts.record_turn(_turn("m1")))
        await asyncio.wait_for(gated.writing.wait(), 10)  # the receipt has boarded
        read = asyncio.create_task(receipts.turn("gear", "m1"))
        await asyncio.sleep(0.05)
        assert not read.done() and not recorded.done()
        gated.gate.set()
        found = await asyncio.wait_for(read, 10)
        assert found is not None and found.answer == "Two years on the frame." and counter.transactions == 0
        await recorded
    finally:
        gated.gate.set()
        await sessions.close()


async def test_a_carried_store_writes_on_its_own_only_receipts_that_waited_its_whole_window(tmp_path: Path) -> None:
    # In a stream of turns the write-behind boards each receipt on the flush after its turn; the receipts'
    # own writer must not take the receipt of the turn just answered (it would always find one).
    archive = await _archive(tmp_path)
    try:
        store = FeedbackStore(archive, batch_window_s=0.01)
        store.carried(flush_interval_s=0.04)  # nothing boards here: the own writer takes each in turn
        counter = CountingArchive(store)
        first = asyncio.create_task(store.record_turn(_turn("m1")))
        await asyncio.sleep(0.1)  # half the window
        second = asyncio.create_task(store.record_turn(_turn("m2")))
        await asyncio.wait_for(first, 10)
        assert not second.done() and set(await _stored(archive)) == {"m1"} and counter.transactions == 1
        await asyncio.wait_for(second, 10)
        assert set(await _stored(archive)) == {"m1", "m2"} and counter.transactions == 2
    finally:
        await archive.close()


def test_the_services_carry_receipts_on_the_session_write_behind(services_factory: Callable[..., Services]) -> None:
    services = services_factory()
    archived = write_behind(services.store)
    assert archived is not None and services.feedback is not None
    assert archived._riders == [services.feedback] and services.feedback._carried
