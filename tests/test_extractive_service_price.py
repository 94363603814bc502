"""The price of doing something for a product is the service's, not the product's, on an invented kettle page:
"it broke, what does a repair cost" wants the repair line, not the price list of the kettle."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

KETTLE = [
    chunk(
        "kettle",
        "暖壶 K3 商品详情",
        "价格与颜色\n- 白色售价 199 元。\n- 黑色售价 229 元。\n- 墨绿色售价 259 元。",
        section="价格与颜色",
        index=0,
    ),
    chunk(
        "kettle",
        "暖壶 K3 商品详情",
        "售后服务\n- 把手更换价格为 39 元。\n- 温控器维修价格为 69 元。",
        section="售后服务",
        index=1,
    ),
]


def test_a_repair_price_is_the_service_line() -> None:
    out = answer("坏了修一下要多少钱", KETTLE, query="暖壶 K3 坏了修一下要多少钱")
    assert "69 元" in out.splitlines()[1], out
    assert "199 元" not in out and "259 元" not in out, out


def test_the_product_price_still_answers_a_plain_price_question() -> None:
    out = answer("暖壶 K3 多少钱", KETTLE)
    assert "199 元" in out and "39 元" not in out, out
