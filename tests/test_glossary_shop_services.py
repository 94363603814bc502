"""Shop services a page in the other language names its own way (`glossary.CONCEPTS`): insurance, samples,
gift wrapping (invented stationery shop)."""

from __future__ import annotations

import pytest

from rag_service.domain import Chunk
from rag_service.glossary import concepts
from rag_service.rerank import rerank


def _chunk(doc: str, title: str, text: str, score: float, lang: str) -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, score, 50, lang=lang)


@pytest.mark.parametrize(
    ("zh", "en", "concept"),
    [
        ("钢笔能买保险吗", "Every pen can be insured against loss for a year.", "insurance"),
        ("墨水有小样吗", "Each ink comes in a 5 ml trial size.", "sample"),
        ("送人的话能装进礼盒里吗", "Gift wrapping: a rigid gift box with a ribbon.", "gift_wrap"),
    ],
)
def test_a_shop_service_is_one_concept_in_either_language(zh: str, en: str, concept: str) -> None:
    assert concept in concepts(zh) and concept in concepts(en)


def test_a_chinese_question_about_gift_boxes_finds_the_english_gift_wrapping_page() -> None:
    # The Chinese returns page mentions a gift box in passing and outscores the English service page on the
    # embedding alone; the concept shared across languages, in the English page's title, lifts it above.
    returns = _chunk("returns", "退换货政策", "已经刻字的礼盒不退不换。", 0.86, "zh")
    wrapping = _chunk("wrapping", "Gift Wrapping and Cards", "A rigid box with a ribbon, 16 yuan.", 0.80, "en")
    assert rerank("礼盒怎么收费", [returns, wrapping])[0].doc_id == "wrapping"


@pytest.mark.parametrize(
    "question",
    ["Could you check where my parcel is?", "Where's my package? It said shipped.", "where is my order right now"],
)
def test_asking_where_ones_order_is_is_tracking(question: str) -> None:
    assert "track" in concepts(question)
    # "where" alone is a place, not a parcel's progress.
    assert "track" not in concepts("I can't remember where my warranty card went.")


def test_an_english_where_is_my_parcel_question_finds_the_chinese_tracking_lines() -> None:
    # Same page, two sections: the order-change lines share "order" with the question, the tracking ones "track".
    change = _chunk("orders", "订单帮助", "发货前可以在小程序里改一次收货地址。", 0.84, "zh")
    status = _chunk("orders", "订单帮助", "在小程序的订单页可以查看物流进度。", 0.82, "zh")
    assert rerank("How do I see where my order is?", [change, status])[0].text == status.text
