"""A "…呢" follow-up asks again what its rewrite asks, on an invented luggage shop: the yes-or-no question
before it, not an older question's kind of value."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk, conversation

PAGE = [
    chunk(
        "trunks",
        "远途行李箱 商品详情",
        "远途 24 寸\n- 售价：499 元\n- 拉杆：三段可调，高度 95–105 cm",
        section="远途 24 寸",
        index=0,
    ),
    chunk(
        "trunks",
        "远途行李箱 商品详情",
        "远途 28 寸\n- 售价：699 元\n- 拉杆：四段可调，高度 98–112 cm",
        section="远途 28 寸",
        index=1,
    ),
]


def test_a_follow_up_asks_the_yes_or_no_question_its_rewrite_asks() -> None:
    memory = conversation(
        ("远途 24 寸多少钱", "- 远途 24 寸：售价：499 元（远途行李箱 商品详情）"),
        ("拉杆能调高度吗", "- 远途 24 寸：拉杆：三段可调，高度 95–105 cm（远途行李箱 商品详情）"),
    )
    out = answer("28 寸的呢", PAGE, query="远途 28 寸 拉杆能调高度吗", memory=memory)
    assert "98–112 cm" in out and "699 元" not in out
