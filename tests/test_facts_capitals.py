"""A provincial capital names its province: a shipping row written per province ("西藏、青海：…") answers a customer
who names their city, on an invented tea shop's shipping page."""

from __future__ import annotations

from rag_service.facts import places
from tests.extractive_kit import answer, chunk

SHIPPING = chunk(
    "shipping",
    "茶舍 配送说明",
    "运费\n江浙沪：每单运费 6 元，满 59 元包邮。\n西藏、青海：每单运费 38 元，不参加包邮。\n其他地区：每单运费 12 元，满 99 元包邮。",
    section="运费",
)


def test_capitals_name_their_province() -> None:
    assert "xz_" in places("寄到拉萨")
    assert "qh_" in places("shipping to Xining")
    assert "xj_" in places("乌鲁木齐能送吗")


def test_the_province_row_answers_for_its_capital() -> None:
    out = answer("发货到拉萨的话邮费怎么算", [SHIPPING])
    assert "38 元" in out
    assert "6 元" not in out
