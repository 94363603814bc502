"""A price recalled with no topic of its own ("what was the price again?") is the one quoted from a product page,
not a later line quoted from a page about a sub-topic (a repair price list), on an invented kayak shop."""

from __future__ import annotations

from rag_service.domain import MemoryView, Message, Round
from rag_service.recall import recall_answer


def _memory(*rounds: tuple[str, str]) -> MemoryView:
    return MemoryView(
        "", 0, tuple(Round(Message("user", u, 1, 0.0), Message("assistant", a, 1, 0.0)) for u, a in rounds)
    )


MEMORY = _memory(
    ("How much is the Ouxing K2?", "- 鸥行 K2：售价：3299 元 (鸥行皮划艇 商品详情)"),
    ("My paddle blade cracked, how much for mending it?", "- 桨叶修补：45 元 (维修服务价格表)"),
    ("Are you open on Sundays?", "- 周日 10:00–18:00 营业 (门店信息)"),
)


def test_the_product_page_price_not_the_repair_list_line() -> None:
    out = recall_answer("Remind me, the kayak came to how much again?", MEMORY, "en")
    assert out is not None and "3299" in out and "45" not in out


def test_a_question_about_the_repair_still_gets_its_line() -> None:
    out = recall_answer("Remind me of the repair cost you quoted?", MEMORY, "en")
    assert out is not None and "45" in out
