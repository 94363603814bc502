"""Annotations: question/answer pairs an admin writes (usually the corrected answer of a thumbs-down
turn), stored as FAQ entries of the tenant's knowledge base.

The archive's `annotations` table is the list an admin edits; each annotation is also a document of
the index (`annotations/{id}`, one FAQ chunk plus one FAQ entry, the same shape as an FAQ file's pair),
so it takes part in retrieval and in the FAQ short path. Editing rewrites that document; deleting
removes it from both collections before the call returns, so the next turn no longer sees it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from rag_core.documents.office import FaqPair
from rag_core.documents.pipeline import doc_id_for
from rag_service.library import Library
from rag_service.sessions.archive.base import Database
from rag_service.sessions.archive.base import available as _available
from rag_service.sessions.archive.schema import annotation_rows as table

SOURCE_PREFIX = "annotations/"


@dataclass(frozen=True, slots=True)
class Annotation:
    id: str
    question: str
    answer: str
    from_message_id: str | None
    created_at: float
    updated_at: float
    source: str
    doc_id: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


class Annotations:
    """Not encrypted at rest, unlike messages: an annotation is knowledge-base content, which the index
    stores in clear text anyway."""

    def __init__(self, archive: Database, library: Library) -> None:
        self.archive, self.library = archive, library

    def _annotation(self, tenant: str, m: Any) -> Annotation:
        source = SOURCE_PREFIX + m["id"]
        return Annotation(
            m["id"], m["question"], m["answer"], m["from_message_id"], m["created_at"], m["updated_at"], source,
            doc_id_for(source, tenant),
        )  # fmt: skip

    async def _index(self, tenant: str, annotation: Annotation) -> None:
        title = " ".join(annotation.question.split())[:200]
        await self.library.write_faq(
            annotation.source, tenant, title, [FaqPair((annotation.question,), annotation.answer)]
        )

    @_available
    async def create(self, tenant: str, question: str, answer: str, from_message_id: str | None) -> Annotation:
        await self.archive.connect_ready()
        now = time.time()
        row = {
            "id": uuid.uuid4().hex,
            "tenant": tenant,
            "question": question,
            "answer": answer,
            "from_message_id": from_message_id,
            "created_at": now,
            "updated_at": now,
        }
        annotation = self._annotation(tenant, row)
        # Index first: a row without its entry would be listed but never answer anything.
        await self._index(tenant, annotation)
        try:
            async with self.archive.engine.begin() as conn:
                await conn.execute(table.insert().values(**row))
        except BaseException:
            await self.library.delete(annotation.doc_id, tenant)
            raise
        return annotation

    @_available
    async def list(self, tenant: str) -> list[Annotation]:
        await self.archive.connect_ready()
        async with self.archive.engine.connect() as conn:
            rows = (
                await conn.execute(sa.select(table).where(table.c.tenant == tenant).order_by(table.c.updated_at.desc()))
            ).mappings()
            return [self._annotation(tenant, m) for m in rows]

    @_available
    async def get(self, tenant: str, annotation_id: str) -> Annotation | None:
        await self.archive.connect_ready()
        async with self.archive.engine.connect() as conn:
            m = (
                (await conn.execute(sa.select(table).where(table.c.tenant == tenant, table.c.id == annotation_id)))
                .mappings()
                .first()
            )
        return self._annotation(tenant, m) if m is not None else None

    @_available
    async def update(
        self, tenant: str, annotation_id: str, question: str | None, answer: str | None
    ) -> Annotation | None:
        old = await self.get(tenant, annotation_id)
        if old is None:
            return None
        q, a, now = question or old.question, answer or old.answer, time.time()
        new = Annotation(old.id, q, a, old.from_message_id, old.created_at, now, old.source, old.doc_id)
        await self._index(tenant, new)
        async with self.archive.engine.begin() as conn:
            await conn.execute(
                table.update()
                .where(table.c.tenant == tenant, table.c.id == annotation_id)
                .values(question=q, answer=a, updated_at=now)
            )
        return new

    @_available
    async def delete(self, tenant: str, annotation_id: str) -> bool:
        old = await self.get(tenant, annotation_id)
        if old is None:
            return False
        await self.library.delete(old.doc_id, tenant)
        async with self.archive.engine.begin() as conn:
            await conn.execute(table.delete().where(table.c.tenant == tenant, table.c.id == annotation_id))
        return True
