"""Query rewriting: turn a follow-up into a standalone query for retrieval."""

from __future__ import annotations

from typing import Protocol

from rag_service.domain import MemoryView, RewriteResult


class Rewriter(Protocol):
    async def rewrite(self, question: str, view: MemoryView) -> RewriteResult: ...


class NoRewriter:
    """Retrieval sees the question as asked."""

    async def rewrite(self, question: str, view: MemoryView) -> RewriteResult:
        return RewriteResult(question, "none")
