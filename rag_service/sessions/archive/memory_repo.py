"""The user-memory repository: durable facts about a user (rag_service.user_memory decides which).

Facts are deduplicated per user by a hash of their normalized text (a keyed hash when the archive is
encrypted, so equal facts collide while the plaintext stays hidden).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass

import sqlalchemy as sa

from rag_service.sessions.archive.base import Database, available
from rag_service.sessions.archive.crypto import seal, unseal
from rag_service.sessions.archive.schema import user_memories


@dataclass(frozen=True, slots=True)
class StoredFact:
    id: int
    user_id: str
    fact: str
    source_session: str | None
    updated_at: float


def _normalize_fact(fact: str) -> str:
    return re.sub(r"\s+", " ", fact).strip()


class MemoryRepository(Database):
    def _fact_hash(self, fact: str) -> str:
        if self.cipher is not None:
            return self.cipher.fact_hash(fact)
        return hashlib.sha256(fact.encode("utf-8")).hexdigest()

    @available
    async def add_memory(self, user_id: str, fact: str, source_session: str | None = None) -> StoredFact:
        """Stores a fact about a user; the same fact again only refreshes updated_at and source_session."""
        fact = _normalize_fact(fact)
        if not fact:
            raise ValueError("empty fact")
        await self.connect_ready()
        digest, now = self._fact_hash(fact), time.time()
        stored, encrypted = seal(self.cipher, fact)
        row = {
            "user_id": user_id,
            "fact": stored,
            "fact_hash": digest,
            "encrypted": encrypted,
            "source_session": source_session,
            "updated_at": now,
        }
        async with self.engine.begin() as conn:
            await conn.execute(
                self._upsert(user_memories, ["user_id", "fact_hash"], ["source_session", "updated_at"]), [row]
            )
            found = (
                await conn.execute(
                    sa.select(user_memories.c.id).where(
                        user_memories.c.user_id == user_id, user_memories.c.fact_hash == digest
                    )
                )
            ).scalar_one()
        return StoredFact(int(found), user_id, fact, source_session, now)

    @available
    async def list_memories(self, user_id: str, limit: int | None = None) -> list[StoredFact]:
        """Newest first."""
        await self.connect_ready()
        stmt = (
            sa.select(user_memories)
            .where(user_memories.c.user_id == user_id)
            .order_by(user_memories.c.updated_at.desc(), user_memories.c.id.desc())
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).all()
        return [
            StoredFact(int(r.id), r.user_id, unseal(self.cipher, r.fact, r.encrypted), r.source_session, r.updated_at)
            for r in rows
        ]

    @available
    async def delete_memory(self, user_id: str, memory_id: int) -> bool:
        await self.connect_ready()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                sa.delete(user_memories).where(user_memories.c.user_id == user_id, user_memories.c.id == memory_id)
            )
        return bool(result.rowcount)

    @available
    async def delete_memories(self, user_id: str) -> int:
        """Forgets everything about a user; returns how many facts were deleted."""
        await self.connect_ready()
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.delete(user_memories).where(user_memories.c.user_id == user_id))
        return int(result.rowcount)
