"""What the extractive answerer's tests build their pages and conversations from."""

from __future__ import annotations

from rag_service.domain import Chunk, GenerationInput, MemoryView, Message, Round
from rag_service.extractive import ExtractiveGenerator


def chunk(doc: str, title: str, text: str, section: str = "", index: int = 0) -> Chunk:
    return Chunk(f"{doc}-{index}", doc, f"docs/{doc}", title, text, 0.9, 50, section=section, index=index)


def answer(question: str, chunks: list[Chunk], query: str = "", memory: MemoryView | None = None) -> str:
    return ExtractiveGenerator(3).answer(GenerationInput(question, query or question, chunks, memory))


def conversation(*rounds: tuple[str, str]) -> MemoryView:
    """The recent rounds (question, answer) of a session with no summary."""
    made = tuple(Round(Message("user", u, 1, 0.0), Message("assistant", a, 1, 0.0)) for u, a in rounds)
    return MemoryView("", 0, made)
