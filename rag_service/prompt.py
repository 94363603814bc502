"""Prompt assembly: system prompt, summary (as a system message), recent rounds verbatim, then one user
message holding the retrieved context (delimited as quoted data) and the question.

User text only ever goes into user messages; retrieved text is escaped so it cannot close its own
delimiter and pose as instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_service.domain import Chunk, Round
from rag_service.settings import PromptSettings

OPEN_DOCS, CLOSE_DOCS = "<documents>", "</documents>"


def summary_message(settings: PromptSettings, summary: str) -> str:
    return f"{settings.summary_header}\n{summary}"


def question_part(settings: PromptSettings, question: str) -> str:
    return f"{settings.question_header}{question}"


def chunk_block(index: int, chunk: Chunk) -> str:
    text = chunk.text.replace("</document", "<\\/document").replace("</documents", "<\\/documents")
    title = chunk.title.replace('"', "'")
    return f'<document index="{index}" title="{title}" source="{chunk.source}">\n{text}\n</document>'


def chunk_wrapper(chunk: Chunk) -> str:
    """What a chunk's block adds around its words, so its cost is known before the block is built."""
    return chunk_block(99, Chunk(chunk.id, chunk.doc_id, chunk.source, chunk.title, "", 0.0, 0))


def final_user_message(settings: PromptSettings, chunks: Sequence[Chunk], question: str) -> str:
    if chunks:
        body = "\n".join(chunk_block(i + 1, c) for i, c in enumerate(chunks))
        context = f"{settings.context_header}\n{OPEN_DOCS}\n{body}\n{CLOSE_DOCS}\n\n"
    else:
        context = f"{settings.context_header}\n{OPEN_DOCS}\n{CLOSE_DOCS}\n\n"
    return context + question_part(settings, question)


def build_messages(
    settings: PromptSettings,
    system_prompt: str,
    profile: str,
    summary: str,
    rounds: Sequence[Round],
    chunks: Sequence[Chunk],
    question: str,
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    if profile:
        messages.append({"role": "system", "content": profile})
    if summary:
        messages.append({"role": "system", "content": summary_message(settings, summary)})
    for r in rounds:
        messages.append({"role": "user", "content": r.user.content})
        messages.append({"role": "assistant", "content": r.assistant.content})
    messages.append({"role": "user", "content": final_user_message(settings, chunks, question)})
    return messages
