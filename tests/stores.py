"""Reaching the layers of a composed session store (rag_service.sessions.build), for tests that look
inside: the write-behind store sits under the PII masking layer when privacy is on (the default)."""

from __future__ import annotations

from rag_service.sessions.interface import SessionStore
from rag_service.sessions.masking import MaskedStore
from rag_service.sessions.writebehind import ArchivedStore


def write_behind(store: SessionStore) -> ArchivedStore:
    inner = store.inner if isinstance(store, MaskedStore) else store
    assert isinstance(inner, ArchivedStore)
    return inner
