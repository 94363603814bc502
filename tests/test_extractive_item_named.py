"""A value question that names one item of a page's price lines by a word only that item's line says (a model
number, a size): the asked item's line, not its siblings' lines that score near it. A question naming no item
(the family alone) still gets the options, and one naming two items gets both."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

DRONE_PAGE = chunk(
    "lark-z6",
    "云雀 Z6 航拍无人机 商品详情",
    "\n".join(
        [
            "## 价格与配置",
            "搭配 G2 两轴云台、64GB 存储卡，售价 3899 元。",
            "搭配 G3 三轴云台、128GB 存储卡，售价 4599 元。",
            "## English summary",
            "The Lark Z6 starts at ¥3299 (G1 gimbal, no memory card).",
            "The Fly More bundle costs ¥5299.",
        ]
    ),
)


def test_the_named_items_price_without_its_siblings_prices() -> None:
    out = answer("How much is the Lark Z6 with the G2 gimbal?", [DRONE_PAGE])
    assert "3899" in out, out
    assert "5299" not in out and "3299" not in out and "4599" not in out, out


def test_two_named_items_both_get_their_prices() -> None:
    out = answer("云雀 Z6 的 G2 和 G3 分别多少钱", [DRONE_PAGE])
    assert "3899" in out and "4599" in out, out


def test_the_family_alone_still_gets_the_options() -> None:
    out = answer("云雀 Z6 多少钱", [DRONE_PAGE])
    assert sum(p in out for p in ("3299", "3899", "4599", "5299")) >= 2, out
