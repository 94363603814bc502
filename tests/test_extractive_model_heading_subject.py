"""A quoted line that names no model ("售价：299 元") is quoted with its heading when the heading reads like a
model's name though no product reader parses it ("风行 30L 旅行包"), on an invented luggage shop's page; a
heading that states a time or a price is a topic and is not prefixed."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

TITLE = "风行（Fengxing）箱包 商品详情"
PAGE = [
    chunk("bags", TITLE, "风行 18L 骑行包\n- 售价：299 元\n- 颜色：黑色、橄榄绿", section="风行 18L 骑行包", index=0),
    chunk("bags", TITLE, "风行 30L 旅行包\n- 售价：459 元\n- 颜色：深灰、砖红", section="风行 30L 旅行包", index=1),
]
HOURS = chunk(
    "hours",
    "门店营业时间",
    "周末 10:00–22:00\n- 周六、周日照常营业，节假日另行通知。",
    section="周末 10:00–22:00",
    index=2,
)


def test_a_line_under_a_model_heading_says_whose_it_is() -> None:
    out = answer("风行 30L 多少钱", PAGE)
    assert "风行 30L 旅行包：售价：459 元" in out
    assert "299" not in out


def test_a_heading_stating_a_time_is_no_subject() -> None:
    out = answer("周末营业吗", [HOURS])
    assert "照常营业" in out
    assert "10:00–22:00：" not in out
