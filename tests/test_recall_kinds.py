"""Recall picks the value of the kind asked (an order's amount or its number, a membership level, a price
rather than a cap) from the line the question's subject names. Invented shops and conversations."""

from __future__ import annotations

from rag_service.domain import MemoryView, Message, Round
from rag_service.recall import recall_answer


def _memory(*rounds: tuple[str, str]) -> MemoryView:
    return MemoryView(
        "", 0, tuple(Round(Message("user", u, 1, 0.0), Message("assistant", a, 1, 0.0)) for u, a in rounds)
    )


def _said(question: str, memory: MemoryView) -> str:
    """The answer without the quoted line it came from."""
    lang = "en" if question.isascii() else "zh"
    answer = recall_answer(question, memory, lang)
    assert answer is not None, question
    return answer.split("（原话")[0].split("(Said earlier")[0]


def test_an_order_amount_is_an_amount_and_a_postal_code_is_no_order_number() -> None:
    memory = _memory(
        ("我下了一单 2 台空气炸锅，一共 1234 元，能开专票吗", "- 专票需要提供税号和开户行。"),
        ("退货寄到哪", "- 退货请寄到：杭州市西湖区云栖路 77 号 5 楼售后组，邮编 310012。（退货说明）"),
    )
    amount = _said("我一开始说的订单金额是多少", memory)
    assert "1234" in amount and "310012" not in amount
    # Nothing the customer said is an order number, and the return address's postal code is none either.
    number = recall_answer("我之前说的订单号是多少", memory, "zh")
    assert number is None or "310012" not in number.split("（原话")[0]
    with_order = _memory(("我的订单 QX20250711-3308 还没发货", "- 一般 48 小时内发出。"), *memory_rounds(memory))
    assert "QX20250711-3308" in _said("我之前说的订单号是多少", with_order)


def memory_rounds(memory: MemoryView) -> list[tuple[str, str]]:
    return [(r.user.content, r.assistant.content) for r in memory.rounds]


def test_a_membership_level_asked_back_is_the_level_the_customer_named() -> None:
    memory = _memory(
        ("I'm a platinum member here. Is delivery free for me?", "- Platinum members get free delivery."),
        ("How many points do I get per order at my tier?", "- Members earn 1 point per yuan spent."),
    )
    assert "platinum" in _said("Which tier did I tell you I'm on?", memory).lower()
    zh = _memory(
        ("我是黑卡，生日有礼物吗", "- 生日当月可领一张 20 元券。"), ("这张卡积分能换什么", "- 积分可以兑换小样。")
    )
    assert "黑卡" in _said("我前面说我是什么卡来着", zh)
    shop_word = _memory(("我是铜星会员，包邮吗", "- 满 99 元包邮。"), ("会员积分能换什么", "- 积分可以兑换小样。"))
    assert "铜星会员" in _said("我前面说我是什么会员来着", shop_word)
    # A level named in the shop's own words, with no metal or colour, is still found by quoting its line.
    own = _memory(("我是星耀会员，包邮吗", "- 满 99 元包邮。"), ("发票呢", "- 电子发票下单后自动开具。"))
    assert "星耀会员" in recall_answer("我刚才说我是什么会员来着", own, "zh") or ""


def test_a_price_asked_back_is_the_price_not_the_cap_of_the_same_plan() -> None:
    memory = _memory(
        ("How much is the Care plan for a year?", "- Care plan: Annual price: 560 yuan. (Care Plans)"),
        ("What does it pay?", "- Care plan: covers 80% after a 100 yuan excess, up to 9000 yuan a year. (Care Plans)"),
    )
    price = _said("What did you say the Care plan costs per year?", memory)
    assert "560" in price and "9000" not in price
    most = _said("What did you say the most it pays in a year was?", memory)
    assert "9000" in most and "560" not in most


def test_a_bare_price_the_customer_quoted_and_a_lunar_date_are_found() -> None:
    memory = _memory(
        ("楼下那家给我报价 85，你们剪毛多少钱", "- 小型犬剪毛 120 元起。"),
        ("正月初三到初九要出门，能寄养吗", "- 春节期间可以寄养，需提前预约。"),
        ("能接送吗", "- 5 公里内上门接送 40 元。"),
    )
    quoted = _said("我刚才说楼下那家报的多少钱来着", memory)
    assert "85" in quoted and "120" not in quoted and "40" not in quoted
    assert "正月初三" in _said("我之前说哪天出门来着", memory)


def test_a_price_asked_back_is_not_a_spend_threshold_nor_a_line_about_something_else() -> None:
    memory = _memory(
        ("Can I spread 700 yuan over 3 payments?", "- Orders of 500 yuan or more can be split into payments."),
        ("Which serum is mildest?", "- The Lumi Basic serum is the mildest, priced at 189 yuan."),
    )
    # Neither the spend a condition names nor a price of something else is the fee asked about: the
    # knowledge base answers instead.
    assert recall_answer("What was the fee for three payments again?", memory, "en") is None
    assert "189" in _said("What did you say the Lumi Basic costs?", memory)


def test_a_price_asked_back_with_no_one_named_is_the_shop_s_not_the_customer_s_total() -> None:
    memory = _memory(
        ("想买两瓶 Lumi Max，一共 860 元，能分期吗", "- 满 500 元可以分期。"),
        ("分 3 期手续费多少", "- 3 期手续费 2.5%。"),
    )
    assert recall_answer("Lumi Max 一瓶多少钱来着", memory, "zh") is None
    assert "860" in _said("我开头说一共多少钱来着", memory)


def test_asking_back_with_other_time_words_points_at_the_side_named() -> None:
    memory = _memory(
        ("我打算腊月二十六过去，店里那天开门吗", "- 春节期间除夕到初二休息，其他日子正常营业。"),
        ("运费多少", "- 同城配送 12 元。"),
    )
    assert "腊月二十六" in _said("我前头说哪天过去来着", memory)
    assert "12" in _said("方才你报的运费是多少", memory)
