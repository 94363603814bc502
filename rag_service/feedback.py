"""Ratings of answers, the receipts they are judged by, and the report built from them.

Every answered turn of a session leaves a receipt row (`turn_receipts`: the question, the answer, the
rewritten query, the sources, the turn's kind and its budget receipt), written off the request path like
the archive's messages. A rating (`feedback`) is one row per assistant message, replaced when the user
changes their mind. Both live in the archive database (tables added by migration 0002).

An answer's message id is derived from what the archive already identifies a message by (session, role,
creation time), so the id handed out with the answer is the one `GET /messages` shows, without a new
column on the messages table or a change to how the live stores keep messages.

Turn kinds: `first` (nothing before it), `follow_up` (the rewriter read it in context), `standalone`
(a later question the rewriter left as it was), `new_topic` (a topic switch), `unrewritten` (rewriting
is off). The memory hit rate is the share of rated follow-ups rated up: did the service understand a
question that depended on what was said before.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from rag_service.privacy import Masker
from rag_service.sessions.archive.base import Database
from rag_service.sessions.archive.base import available as _available
from rag_service.sessions.archive.schema import feedback, turn_receipts

Rating = Literal["up", "down"]
TURN_KINDS = ("first", "follow_up", "standalone", "new_topic", "unrewritten")
_REWRITTEN = ("called", "rule", "fallback")


def message_id(session_id: str, role: str, created_at: float) -> str:
    return hashlib.sha256(f"{session_id}\0{role}\0{created_at!r}".encode()).hexdigest()[:32]


def turn_kind(receipt: Mapping[str, Any]) -> str:
    action = str(receipt.get("rewrite", "none"))
    if action in _REWRITTEN:
        return "follow_up"
    if action == "none":
        return "unrewritten"
    if receipt.get("topic_switch"):
        return "new_topic"
    if not receipt.get("rounds_kept") and not receipt.get("compressed"):
        return "first"
    return "standalone"


@dataclass(frozen=True, slots=True)
class TurnRecord:
    message_id: str
    tenant: str
    session_id: str
    question: str
    answer: str
    rewritten_query: str
    mode: str
    sources: list[dict[str, Any]]
    receipt: dict[str, Any]
    created_at: float

    @property
    def kind(self) -> str:
        return turn_kind(self.receipt)

    @property
    def intent(self) -> str:
        return str(self.receipt.get("intent") or "")[:64]


class UnknownMessage(LookupError):
    """No answer with this id in this session (or not yet archived)."""


class FeedbackStore:
    """Receipts and ratings in the archive database. Text is PII-masked like the messages, and encrypted
    with `database.encryption_key` when one is set."""

    def __init__(self, archive: Database, masker: Masker | None = None, *, batch_window_s: float = 0.2) -> None:
        self.archive, self.masker = archive, masker
        # Receipts are written like the archive's messages: those of the turns answered within
        # `batch_window_s` go in one transaction. On file SQLite a transaction of one receipt cost 1.5 ms of
        # CPU (the driver's thread hops, the commit), four in one 0.3 ms each (bench/turn_cpu.py).
        self.batch_window_s = batch_window_s
        self._queued: list[tuple[dict[str, Any], asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        # One batch at a time, per event loop (the CLIs and tests run one store under several loops).
        self._writing: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        # Receipts boarded on the session archive's write-behind (`board`), until its transaction ends.
        self._riding: set[asyncio.Future[None]] = set()
        self._carried = False

    def _seal(self, text: str, *, masked: bool = False) -> str:
        text = self.masker.mask(text) if self.masker is not None and not masked else text
        return self.archive.cipher.encrypt(text) if self.archive.cipher is not None else text

    def _masked(self, value: Any) -> Any:
        """The sources with each text masked on its own, as a message is, not their JSON: its escapes hid
        numbers from the masker (the "n" of an escaped line break reads as a letter next to a phone
        number), and the same chunks' texts come back turn after turn, masked once (the masker remembers
        them) instead of the whole JSON scanned again."""
        if self.masker is None:
            return value
        if isinstance(value, str):
            return self.masker.mask(value)
        if isinstance(value, list):
            return [self._masked(v) for v in value]
        if isinstance(value, dict):
            return {k: self._masked(v) for k, v in value.items()}
        return value

    def _open(self, text: str, encrypted: bool) -> str:
        return self.archive.cipher.decrypt(text) if encrypted and self.archive.cipher is not None else text

    async def record_turn(self, turn: TurnRecord) -> None:
        """Stores the turn's receipt; returns once it is in the database (with the receipts of the turns
        answered meanwhile, in one transaction), raises what writing them raised."""
        row = self._receipt_row(turn)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._queued.append((row, done))
        if self._writer is None or self._writer.done() or self._writer.get_loop() is not loop:
            self._writer = loop.create_task(self._write_later())
        await done

    def carried(self, flush_interval_s: float) -> None:
        """The session archive's write-behind boards the queued receipts on its flushes (`board`), one
        flush interval after their turn's messages at most: the receipts' own writer is then the fallback
        (an archive in back-off, a flush that left just before a receipt was queued). It waits longer,
        and takes only the receipts that waited its whole window: were it to take everything queued, in a
        stream of turns it would take each time the receipts of the turn just answered, and the turns'
        writes would again be two transactions."""
        self._carried = True
        self.batch_window_s = max(self.batch_window_s, 5 * flush_interval_s)

    async def _write_later(self) -> None:
        loop = asyncio.get_running_loop()
        due = {done for _, done in self._queued} if self._carried else None
        await asyncio.sleep(self.batch_window_s)
        await self._write_queued(due)
        if self._queued and self._writer is asyncio.current_task():
            self._writer = loop.create_task(self._write_later())

    async def _write_queued(self, due: set[asyncio.Future[None]] | None = None) -> None:
        """Writes what is queued, and what is queued meanwhile; also waits for a batch in flight, its own
        or one boarded on the session archive's write-behind (so a read or a delete that calls it sees
        every receipt recorded before it). With `due`: writes those of these receipts still queued."""
        loop = asyncio.get_running_loop()
        if self._writing is None or self._writing[0] is not loop:
            self._writing = (loop, asyncio.Lock())
        async with self._writing[1]:
            if due is not None:
                batch = [q for q in self._queued if q[1] in due]
                self._queued = [q for q in self._queued if q[1] not in due]
                if batch:
                    await self._write_batch(batch)
                return
            while self._queued:
                batch, self._queued = self._queued, []
                await self._write_batch(batch)
        riding = [done for done in self._riding if done.get_loop() is loop]
        if riding:
            # `wait`, not `gather`: a cancelled reader must not cancel the receipts it waited for.
            await asyncio.wait(riding)
            if self._queued:  # put back by a write-behind transaction that failed
                await self._write_queued()

    async def _write_batch(self, batch: list[tuple[dict[str, Any], asyncio.Future[None]]]) -> None:
        try:
            await self._write_rows([row for row, _ in batch])
        except Exception as exc:
            for _, done in batch:
                if not done.done() and not done.get_loop().is_closed():
                    done.set_exception(exc)
        else:
            for _, done in batch:
                if not done.done() and not done.get_loop().is_closed():
                    done.set_result(None)

    def board(self) -> tuple[Callable[[Any], Awaitable[None]], Callable[[BaseException | None], None]] | None:
        """The queued receipts, for the session archive's write-behind to write in its transaction
        (`ArchivedStore.carry`): the turn's messages and its receipt, queued together, commit together.
        Should that transaction fail, the receipts are queued again and written on their own, as
        before, so a failure of the messages' batch loses no receipt."""
        loop = asyncio.get_running_loop()
        if not self._queued or any(done.get_loop() is not loop for _, done in self._queued):
            return None
        batch, self._queued = self._queued, []
        self._riding.update(done for _, done in batch)
        write = self._upsert([row for row, _ in batch])

        def settle(exc: BaseException | None) -> None:
            self._riding.difference_update(done for _, done in batch)
            if exc is None:
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
                return
            self._queued[:0] = batch
            if self._writer is None or self._writer.done():
                self._writer = loop.create_task(self._write_later())

        return write, settle

    @_available
    async def _write_rows(self, rows: list[dict[str, Any]]) -> None:
        await self.archive.connect_ready()
        async with self.archive.engine.begin() as conn:
            await self._upsert(rows)(conn)

    def _upsert(self, rows: list[dict[str, Any]]) -> Callable[[Any], Awaitable[None]]:
        """The receipts' upsert, to run on a connection in a transaction: its own, or the write-behind's."""
        # One row per answer: a receipt recorded twice keeps its latest version (and an upsert of many rows
        # must not name one key twice).
        latest = list({row["message_id"]: row for row in rows}.values())
        stmt = self.archive._upsert(turn_receipts, ["message_id"], [k for k in latest[0] if k != "message_id"])

        async def write(conn: Any) -> None:
            await conn.execute(stmt, latest)

        return write

    def _receipt_row(self, turn: TurnRecord) -> dict[str, Any]:
        return {
            "message_id": turn.message_id,
            "tenant": turn.tenant,
            "session_id": turn.session_id,
            "question": self._seal(turn.question),
            "answer": self._seal(turn.answer),
            "rewritten_query": self._seal(turn.rewritten_query),
            "mode": turn.mode[:32],
            "turn_kind": turn.kind,
            "intent": turn.intent,
            "sources": self._seal(json.dumps(self._masked(turn.sources), ensure_ascii=False), masked=True),
            "receipt": json.dumps(turn.receipt, ensure_ascii=False, default=str),
            "encrypted": self.archive.cipher is not None,
            "created_at": turn.created_at,
        }

    @_available
    async def turn(self, tenant: str, message_id: str) -> TurnRecord | None:
        await self._write_queued()
        await self.archive.connect_ready()
        async with self.archive.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(turn_receipts).where(
                        turn_receipts.c.message_id == message_id, turn_receipts.c.tenant == tenant
                    )
                )
            ).first()
        return self._record(dict(row._mapping)) if row is not None else None

    def _record(self, m: Mapping[str, Any]) -> TurnRecord:
        enc = bool(m["encrypted"])
        return TurnRecord(
            message_id=m["message_id"],
            tenant=m["tenant"],
            session_id=m["session_id"],
            question=self._open(m["question"], enc),
            answer=self._open(m["answer"], enc),
            rewritten_query=self._open(m["rewritten_query"], enc),
            mode=m["mode"],
            sources=json.loads(self._open(m["sources"], enc)),
            receipt=json.loads(m["receipt"]),
            created_at=m["created_at"],
        )

    @_available
    async def rate(
        self, tenant: str, session_id: str, message_id: str, rating: Rating, reason: str = "", comment: str = ""
    ) -> dict[str, Any]:
        """Set (or change) the rating of an answer; the row as stored."""
        await self.archive.connect_ready()
        now = time.time()
        row = {
            "message_id": message_id,
            "tenant": tenant,
            "session_id": session_id,
            "rating": rating,
            "reason": reason[:64],
            "comment": self._seal(comment),
            "encrypted": self.archive.cipher is not None,
            "created_at": now,
            "updated_at": now,
        }
        update = ["rating", "reason", "comment", "encrypted", "updated_at"]
        async with self.archive.engine.begin() as conn:
            await conn.execute(self.archive._upsert(feedback, ["message_id"], update).values(**row))
        return {"message_id": message_id, "rating": rating, "reason": reason, "comment": comment, "updated_at": now}

    @_available
    async def forget_session(self, tenant: str, session_id: str) -> None:
        """Remove a deleted session's receipts and ratings: they hold what its user said."""
        await self._write_queued()  # a receipt still queued must not outlive the delete
        await self.archive.connect_ready()
        async with self.archive.engine.begin() as conn:
            for table in (turn_receipts, feedback):
                await conn.execute(table.delete().where(table.c.tenant == tenant, table.c.session_id == session_id))

    @_available
    async def rows(self, tenant: str, since: float) -> list[dict[str, Any]]:
        """The tenant's ratings since `since`, each with its turn's receipt (None while not archived)."""
        await self._write_queued()
        await self.archive.connect_ready()
        query = (
            sa.select(feedback, *[c.label(f"t_{c.name}") for c in turn_receipts.c])
            .select_from(feedback.outerjoin(turn_receipts, turn_receipts.c.message_id == feedback.c.message_id))
            .where(feedback.c.tenant == tenant, feedback.c.updated_at >= since)
            .order_by(feedback.c.updated_at.desc())
        )
        async with self.archive.engine.connect() as conn:
            result = (await conn.execute(query)).mappings().all()
        out: list[dict[str, Any]] = []
        for m in result:
            turn = None
            if m["t_message_id"] is not None:
                turn = self._record({c.name: m[f"t_{c.name}"] for c in turn_receipts.c})
            out.append(
                {
                    "message_id": m["message_id"],
                    "session_id": m["session_id"],
                    "rating": m["rating"],
                    "reason": m["reason"],
                    "comment": self._open(m["comment"], bool(m["encrypted"])),
                    "updated_at": m["updated_at"],
                    "turn": turn,
                }
            )
        return out


def report(rows: Sequence[dict[str, Any]], *, worst: int = 20) -> dict[str, Any]:
    """Ratings by day, by mode and by turn kind, the memory hit rate, and the worst-rated questions (most
    thumbs-down first; a question asked in several turns counts once, with all its ratings)."""

    def tally() -> dict[str, int]:
        return {"up": 0, "down": 0}

    by_day: dict[str, dict[str, int]] = {}
    by_mode: dict[str, dict[str, int]] = {}
    by_kind: dict[str, dict[str, int]] = {}
    questions: dict[str, dict[str, Any]] = {}
    for r in rows:
        turn: TurnRecord | None = r["turn"]
        rating = r["rating"]
        day = time.strftime("%Y-%m-%d", time.gmtime(r["updated_at"]))
        by_day.setdefault(day, tally())[rating] += 1
        mode = turn.mode if turn else "unknown"
        kind = turn.kind if turn else "unknown"
        by_mode.setdefault(mode, tally())[rating] += 1
        by_kind.setdefault(kind, tally())[rating] += 1
        key = (turn.question if turn else r["message_id"]).strip()
        entry = questions.setdefault(key, {"question": key, "up": 0, "down": 0, "turns": []})
        entry[rating] += 1
        entry["turns"].append(
            {
                "message_id": r["message_id"],
                "session_id": r["session_id"],
                "rating": rating,
                "reason": r["reason"],
                "comment": r["comment"],
                "answer": turn.answer if turn else None,
                "rewritten_query": turn.rewritten_query if turn else None,
                "mode": mode,
                "turn_kind": kind,
                "intent": turn.intent if turn else "",
                "sources": [
                    {k: s.get(k) for k in ("doc_id", "source", "title", "score")}
                    for s in (turn.sources if turn else [])
                ],
                "receipt": turn.receipt if turn else None,
            }
        )
    follow = by_kind.get("follow_up", tally())
    rated_follow = follow["up"] + follow["down"]
    ranked = sorted(questions.values(), key=lambda q: (-q["down"], q["up"], q["question"]))
    return {
        "ratings": len(rows),
        "up": sum(r["rating"] == "up" for r in rows),
        "down": sum(r["rating"] == "down" for r in rows),
        "by_day": dict(sorted(by_day.items())),
        "by_mode": by_mode,
        "by_turn_kind": by_kind,
        "memory_hit_rate": round(follow["up"] / rated_follow, 4) if rated_follow else None,
        "rated_follow_ups": rated_follow,
        "worst": [q for q in ranked if q["down"]][:worst],
    }


def parse_since(text: str) -> float:
    """`7d`, `24h`, `30m` (ago) or epoch seconds -> epoch seconds."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    text = text.strip().lower()
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * units[text[-1]]
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"since {text!r}: use a duration like 7d, 24h, 30m or epoch seconds") from None
