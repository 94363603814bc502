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


def test_a_question_word_the_line_already_says_as_a_concept_is_not_counted_again() -> None:
    # "dry" of the first question is the 烘干 both quoted lines already say: the line about the Max itself,
    # quoted later, is what was said of the Max.
    memory = _memory(
        (
            "How many kilos will it dry?",
            "- 型号 晴晾 D1，烘干容量 6 公斤，售价 2599 元。（晴晾干衣机）\n- Max 用冷凝烘干，衣物不发硬。（晴晾干衣机）",
        ),
        ("And the Max?", "- 型号 晴晾 D3 Max，烘干容量 9 公斤，售价 3899 元。（晴晾干衣机）"),
        ("Is the drum covered by the warranty?", "- 滚筒保修 5 年。（晴晾干衣机）"),
    )
    got = recall_answer("Remind me, what was it the Max could dry?", memory, "en")
    assert got is not None and "9 公斤" in got, got
