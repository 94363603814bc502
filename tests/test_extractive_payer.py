"""Whether the customer bears the carriage ("must we pay the return postage?") asks who pays, on an invented kite shop's
returns and shipping pages: the line saying who bears it, not the shipping fees beside it."""

from __future__ import annotations

from rag_service.facts import Ask, question_asks
from tests.extractive_kit import answer, chunk

RETURNS = chunk(
    "returns",
    "风筝坊 退换说明",
    "三、寄回费用\n非质量问题退回的，寄回邮费由买家自理。\n质量问题的来回邮费由风筝坊承担。",
    section="三、寄回费用",
)
SHIPPING = chunk(
    "shipping",
    "风筝坊 发货说明",
    "运费\n华东地区：每单运费 8 元，满 88 元包邮。\n其他地区：每单运费 14 元，满 128 元包邮。",
    section="运费",
    index=1,
)


def test_bearing_the_carriage_is_a_payer_question() -> None:
    assert question_asks("Must we pay the return postage?")[0] is Ask.PAYER
    assert question_asks("do we have to pay for return shipping?")[0] is Ask.PAYER
    assert question_asks("寄回去运费要我出吗")[0] is Ask.PAYER
    # A way to pay, or whether delivery costs anything, is no payer question.
    assert Ask.PAYER not in question_asks("Do I pay with a card?")
    assert Ask.PAYER not in question_asks("Must we pay for delivery?")


def test_the_line_saying_who_bears_it_answers() -> None:
    out = answer("Must we pay the return postage?", [SHIPPING, RETURNS])
    assert "自理" in out or "承担" in out
    assert "8 元" not in out and "14 元" not in out
