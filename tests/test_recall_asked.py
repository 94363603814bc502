"""A recall of "the X I asked about first" goes by what the customer asked, earliest first."""

from __future__ import annotations

from rag_service.domain import MemoryView, Message, Round
from rag_service.recall import recall_answer


def _memory(*rounds: tuple[str, str]) -> MemoryView:
    made = tuple(Round(Message("user", u, 1, 0.0), Message("assistant", a, 1, 0.0)) for u, a in rounds)
    return MemoryView("", 0, made)


def test_first_thing_asked_about_is_the_earliest_question_naming_it() -> None:
    memory = _memory(
        ("Ridgeline 40L 背包多少钱", "- Ridgeline 40L: Price: ¥780 (Ridgeline Packs)"),
        ("背带磨破了，补一下多少钱", "- 服务 背包背带缝补，价格 45 元。（维修服务）"),
    )
    got = recall_answer("我第一次问的那个背包多少钱", memory, "zh")
    assert got is not None and "780" in got, got
