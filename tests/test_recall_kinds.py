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
    rounds = [
        ("下单买了 2 台烤箱，合计 1234 元，专票能开吗", "- 专票需要提供税号和开户行。"),
        ("退回去寄哪", "- 退回请寄：杭州市西湖区云栖路 77 号 5 楼售后组，邮编 310012。（退回说明）"),
    ]
    memory = _memory(*rounds)
    amount = _said("订单金额起初我报过几块？", memory)
    assert "1234" in amount and "310012" not in amount
    # Nothing the customer said is an order number, and the return address's postal code is none either.
    number = recall_answer("起初我报给你的单号麻烦念一下", memory, "zh")
    assert number is None or "310012" not in number.split("（原话")[0]
    with_order = _memory(("单子 QX20250711-3308 迟迟不发", "- 一般 48 小时内发出。"), *rounds)
    assert "QX20250711-3308" in _said("起初我报给你的单号麻烦念一下", with_order)


def test_a_membership_level_asked_back_is_the_level_the_customer_named() -> None:
    memory = _memory(
        ("Hello, platinum member speaking. Do I ship free?", "- Platinum members get free delivery."),
        ("Points per purchase on my tier, roughly?", "- Members earn 1 point per yuan spent."),
    )
    assert "platinum" in _said("Which tier was it that I mentioned being on?", memory).lower()
    zh = _memory(
        ("本人黑卡，过生日送啥", "- 生日当月可领一张 20 元券。"), ("这张卡攒的分能换啥", "- 积分可以兑换小样。")
    )
    assert "黑卡" in _said("起初我提过自己持哪种卡？", zh)
    shop_word = _memory(("本人铜星会员，包邮不", "- 满 99 元包邮。"), ("会员攒的分能换啥", "- 积分可以兑换小样。"))
    assert "铜星会员" in _said("起初我提过自己属于哪个会员等级？", shop_word)


def test_a_price_asked_back_is_the_price_not_the_cap_of_the_same_plan() -> None:
    memory = _memory(
        ("Care plan pricing for twelve months?", "- Care plan: Annual price: 560 yuan. (Care Plans)"),
        ("Payout terms?", "- Care plan: covers 80% after a 100 yuan excess, up to 9000 yuan a year. (Care Plans)"),
    )
    price = _said("Remind me, you quoted the Care plan at how much per year?", memory)
    assert "560" in price and "9000" not in price
    most = _said("Remind me, you quoted the maximum payout per year as?", memory)
    assert "9000" in most and "560" not in most


def test_a_bare_price_the_customer_quoted_and_a_lunar_date_are_found() -> None:
    memory = _memory(
        ("楼下那家给我报价 85，贵店修毛要几块", "- 小型犬修毛 120 元起。"),
        ("正月初三至初九出远门，能托管吗", "- 春节期间可以托管，需提前预约。"),
        ("接送有吗", "- 5 公里内上门接送 40 元。"),
    )
    quoted = _said("起初我讲楼下那家要价几块？", memory)
    assert "85" in quoted and "120" not in quoted and "40" not in quoted
    assert "正月初三" in _said("起初我讲自己哪天出远门？", memory)


def test_a_price_asked_back_is_not_a_spend_threshold() -> None:
    memory = _memory(
        ("Spreading 700 yuan across 3 payments, possible?", "- Orders of 500 yuan or more can be split."),
        ("Mildest serum you carry?", "- The Lumi Basic serum is the mildest, priced at 189 yuan."),
    )
    # The spend a condition names is no fee (and the customer's 700 is theirs, not a quote): the knowledge
    # base answers instead when nothing else was said.
    assert (
        recall_answer(
            "Remind me, you quoted a charge for splitting into 3 parts?",
            _memory(*[(r.user.content, r.assistant.content) for r in memory.rounds[:1]]),
            "en",
        )
        is None
    )
    assert "189" in _said("Remind me, you quoted Lumi Basic at how much?", memory)


def test_a_price_asked_back_with_no_one_named_is_the_shop_s_not_the_customer_s_total() -> None:
    memory = _memory(
        ("两瓶 Lumi Max 合计 860 元，分期行不行", "- 满 500 元可以分期。"),
        ("拆 3 期收多少手续", "- 3 期手续费 2.5%。"),
    )
    assert recall_answer("Lumi Max 单瓶价格来着", memory, "zh") is None
    assert "860" in _said("起初我报过合计几块？", memory)


def test_asking_back_with_other_time_words_points_at_the_side_named() -> None:
    memory = _memory(
        ("腊月二十六想过去，店里当天营业不", "- 春节期间除夕到初二休息，其他日子正常营业。"),
        ("配送几块", "- 同城配送 12 元。"),
    )
    assert "腊月二十六" in _said("前头我讲哪天过去？", memory)
    assert "12" in _said("方才你讲配送几块？", memory)
