"""PII masking as a layer in front of any session store.

What a customer types is masked (rag_service.privacy.Masker) before the store below sees it: message
content on append and the summary on a summary update. Put in front of the write-behind store, so the
live store, the archive and the spool all only ever hold masked text. Token counts are recounted for
the masked text, so the budget counts what is stored. Everything else passes straight through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from rag_service.domain import Message, SessionMeta
from rag_service.privacy import Masker
from rag_service.sessions.interface import Probe, SessionCatalog, SessionStore, SummaryUpdate


def masked(store: SessionStore, masker: Masker, count_tokens: Callable[[str], int] | None = None) -> MaskedStore:
    """`store` behind the masking layer; still a SessionCatalog if `store` is one."""
    if isinstance(store, SessionCatalog):
        return MaskedCatalog(store, masker, count_tokens)
    return MaskedStore(store, masker, count_tokens)


class MaskedStore:
    def __init__(self, inner: SessionStore, masker: Masker, count_tokens: Callable[[str], int] | None = None) -> None:
        self.inner, self.masker, self.count_tokens = inner, masker, count_tokens

    # -- what gets masked -----------------------------------------------------------------------

    async def append(self, session_id: str, messages: Sequence[Message]) -> int:
        return await self.inner.append(session_id, [self._mask_message(m) for m in messages])

    async def update_summary(self, session_id: str, update: SummaryUpdate) -> bool:
        summary = self.masker.mask(update.summary)
        if summary != update.summary:
            tokens = self._recount(update.summary, summary, update.summary_tokens)
            update = dataclasses.replace(update, summary=summary, summary_tokens=tokens)
        return await self.inner.update_summary(session_id, update)

    def _mask_message(self, message: Message) -> Message:
        content = self.masker.mask(message.content)
        if content == message.content:
            return message
        tokens = self._recount(message.content, content, message.tokens)
        return Message(message.role, content, tokens, message.created_at)

    def _recount(self, before: str, after: str, tokens: int) -> int:
        if self.count_tokens is None:
            return tokens
        return max(0, tokens + self.count_tokens(after) - self.count_tokens(before))

    # -- passed through -------------------------------------------------------------------------

    async def create(self, meta: SessionMeta) -> None:
        await self.inner.create(meta)

    async def load(
        self, session_id: str, start_of: Callable[[SessionMeta], int]
    ) -> tuple[SessionMeta, list[Message], int]:
        return await self.inner.load(session_id, start_of)

    async def set_topic_start(self, session_id: str, index: int) -> None:
        await self.inner.set_topic_start(session_id, index)

    async def set_task(self, session_id: str, task: str) -> None:
        # Slots hold what the customer typed (a phone number too): masked like the messages.
        await self.inner.set_task(session_id, self.masker.mask(task))

    async def messages(self, session_id: str) -> list[Message]:
        return await self.inner.messages(session_id)

    async def delete(self, session_id: str) -> bool:
        return await self.inner.delete(session_id)

    def lock(self, session_id: str) -> AbstractAsyncContextManager[None]:
        return self.inner.lock(session_id)

    async def ping(self) -> None:
        await self.inner.ping()

    def probes(self) -> list[Probe]:
        return self.inner.probes()

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()


class MaskedCatalog(MaskedStore):
    """The masking layer over a store that can list sessions (ids and times only: nothing to mask)."""

    async def list_sessions(self, tenant: str, limit: int, offset: int) -> list[dict[str, Any]]:
        assert isinstance(self.inner, SessionCatalog)  # masked() picks this class only for a catalog
        return await self.inner.list_sessions(tenant, limit, offset)
