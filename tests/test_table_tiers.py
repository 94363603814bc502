"""A stated spend picks the row of the highest tier it reaches."""

from __future__ import annotations

from rag_service.table_rows import Row, reached_tier, stated_spend
from tests.extractive_kit import answer, chunk, conversation

_TABLE = (
    "积分等级按一年内的消费累计：\n"
    "| 级别 | 一年累计消费 | 会员价 |\n"
    "|---|---|---|\n"
    "| 铁杉卡 | 满 500 元 | 99 折 |\n"
    "| 云杉卡 | 满 2000 元 | 93 折 |\n"
    "| 冷杉卡 | 满 6000 元 | 88 折 |\n"
)


def test_reached_tier_is_the_highest_threshold_not_above_the_spend() -> None:
    rows = [Row(("级别", "消费"), (n, f"满 {t} 元")) for n, t in (("a", 500), ("b", 2000), ("c", 6000))]
    assert reached_tier(rows, 2500) == 2000
    assert reached_tier(rows, 100) is None
    assert stated_spend("I spent 2,500 yuan with you this year") == 2500
    assert stated_spend("what does the 2000 card get") is None


def test_spend_question_quotes_the_reached_row() -> None:
    got = answer("我今年在店里累计买了 2600 元，算哪一级", [chunk("cards", "松果会员卡", _TABLE)])
    first = got.splitlines()[1]
    assert "云杉卡" in first, got


def test_english_spend_question_quotes_the_reached_row() -> None:
    table = (
        "Level | Yearly spend | Discount\n"
        "Pine | 800 yuan and above | 3% off\n"
        "Cedar | 3,000 yuan and above | 6% off\n"
        "Redwood | 9,000 yuan and above | 12% off\n"
    )
    got = answer("I spent 9500 yuan last year, which level am I on?", [chunk("cards", "Cone Club", table)])
    assert "Redwood" in got.splitlines()[1], got


def test_follow_up_keeps_the_spend_said_before() -> None:
    memory = conversation(
        ("我今年在店里累计买了 2600 元，算哪一级", "- 级别 云杉卡，一年累计消费 满 2000 元，会员价 93 折。")
    )
    got = answer("那会员价是多少", [chunk("cards", "松果会员卡", _TABLE)], memory=memory)
    assert "93 折" in got.splitlines()[1], got
    assert "88 折" not in got and "99 折" not in got, got


def test_yes_no_question_with_an_amount_quotes_the_minimum() -> None:
    page = (
        "You can pay for your order in parts with a Visa or Mastercard card.\n"
        "Only orders of at least 450 yuan can be paid in parts.\n"
        "Gift cards cannot be paid for in parts."
    )
    got = answer(
        "I want a 1280 yuan kayak, is paying it off monthly possible?", [chunk("pay", "Paying at Cone Club", page)]
    )
    assert "450" in got.splitlines()[1], got


def test_spend_said_before_does_not_answer_another_topic() -> None:
    page = _TABLE + "积分在获得后的第二年年底清零。\n"
    memory = conversation(
        ("我今年在店里累计买了 2600 元，算哪一级", "- 级别 云杉卡，一年累计消费 满 2000 元，会员价 93 折。")
    )
    got = answer("积分哪天过期", [chunk("cards", "松果会员卡", page)], memory=memory)
    assert "清零" in got.splitlines()[1], got


def test_a_spend_said_with_a_chinese_multiplier_reaches_its_tier() -> None:
    assert stated_spend("今年在店里消费了两千五，算哪一级") == 2500
    got = answer("我今年在店里累计买了两千多，算哪一级", [chunk("cards", "松果会员卡", _TABLE)])
    assert "云杉卡" in got.splitlines()[1], got
