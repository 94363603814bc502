"""Line choice of the seventeenth session, on invented shops:
- a line that opens with a decimal figure ("2.5kg 装：…") is no numbered list item: its figure is quoted whole."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

HAY_PAGE = chunk(
    "hay-page",
    "青坡牧草 商品详情",
    "\n".join(
        [
            "青坡 提摩西草",
            "- 1kg 装：45 元",
            "2.5kg 装：99 元",
            "10kg 装：310 元",
        ]
    ),
    section="青坡 提摩西草",
)


def test_a_decimal_pack_size_opening_a_line_is_quoted_whole() -> None:
    out = answer("青坡提摩西草 2.5kg 装多少钱", [HAY_PAGE])
    assert "2.5kg 装：99 元" in out, out
    assert "\n- 5kg" not in out, out


def test_a_numbered_list_item_still_loses_its_number() -> None:
    steps = chunk("hay-care", "青坡牧草 保存方法", "1. 开袋后夹紧袋口，放在阴凉处。\n2. 受潮结块的草请丢掉。", section="保存")
    out = answer("牧草开袋后怎么保存", [steps])
    assert "- 开袋后夹紧袋口" in out, out
