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
    out = answer("出毛病了，修一下收费几块", KETTLE, query="暖壶 K3 出毛病了，修一下收费几块")
    assert "69 元" in out.splitlines()[1], out
    assert "199 元" not in out and "259 元" not in out, out


def test_the_product_price_still_answers_a_plain_price_question() -> None:
    out = answer("暖壶 K3 多少钱", KETTLE)
    assert "199 元" in out and "39 元" not in out, out


BRUSH = [
    chunk(
        "brush",
        "云帆电动牙刷 商品详情",
        "价格\n- 云帆 T2 售价 299 元。\n- 云帆 T2 旗舰版售价 399 元。",
        section="价格",
        index=0,
    ),
    chunk(
        "brush",
        "云帆电动牙刷 商品详情",
        "包装清单\n- 包装内不含旅行充电盒，如需要可在本店单独购买，售价 59 元。",
        section="包装清单",
        index=1,
    ),
]


def test_a_part_bought_apart_is_asked_the_spoken_way_too() -> None:
    out = answer("T2 的充电盒得另外买吧，什么价", BRUSH, query="云帆 T2 的充电盒得另外买吧，什么价")
    assert "59 元" in out.splitlines()[1], out
