"""Questions shops' customers ask in their own words, on an invented ski-and-scooter shop: a figure the
customer states that falls in a span a line or row gives ("体重 62 公斤" in "体重 50–70 kg"), colloquial
question types ("啥价", "能跑多远", "咋装"), FAQ questions set in bold, and a model named by words no
product-name parser reads."""

from __future__ import annotations

from rag_service.facts import Ask, question_asks
from rag_service.table_rows import span_fit, spans, stated_figures
from tests.extractive_kit import answer, chunk

SKIS = chunk(
    "skis",
    "雪峰 滑雪板 商品详情",
    "\n".join(
        [
            "雪峰 滑雪板 商品详情",
            "雪峰滑雪板适合初学者和进阶滑手，板芯为杨木。",
            "板长怎么选",
            "- 体重 50 kg 以内：选 135 cm 板长。",
            "- 体重 50–70 kg：选 150 cm 板长。",
            "- 体重 70 kg 以上：选 162 cm 板长。",
            "售后",
            "板刃磨损免费修复一次，之后每次 60 元。",
        ]
    ),
)

PADDLES = chunk(
    "paddles",
    "Fjord Paddles",
    "\n".join(
        [
            "| Paddle | Paddler height | Price |",
            "|---|---|---|",
            "| Fjord 210 | under 160 cm | 399 yuan |",
            "| Fjord 220 | 160–180 cm | 429 yuan |",
            "| Fjord 230 | over 180 cm | 459 yuan |",
        ]
    ),
)

SCOOTERS = chunk(
    "scooters",
    "风驰电动滑板车 商品详情",
    "\n".join(
        [
            "风驰电动滑板车 商品详情",
            "风驰 S2 充满电约需 5 小时，充电器随车附送。",
            "风驰 S2 满电续航约 45 km，最高时速 25 km/h。",
            "风驰 S2 售价 2599 元。",
            "折叠方法",
            "先踩下车头的折叠扣，再把立管向后放倒，挂到后挡泥板的挂钩上。",
        ]
    ),
)

RENTAL_FAQ = chunk(
    "faq",
    "Visitor FAQ",
    "\n".join(
        [
            "Visitor FAQ",
            "**Q: Do you sell gift cards?**",
            "A: Yes, in amounts of 200 or 500 yuan.",
            "**Q: Can I rent skis for a day?**",
            "A: Yes, at the mountain store only. A full ski set is 120 yuan per day with a 1000 yuan deposit.",
        ]
    ),
)

# A page with one section per model, the models named by a family word and a variant word only.
FLASKS = chunk(
    "flasks",
    "晴川保温杯 商品详情",
    "\n".join(
        [
            "晴川保温杯 商品详情",
            "晴川 Pro",
            "- 售价：199 元",
            "- 保温时长：12 小时",
            "晴川 Lite",
            "- 售价：129 元",
            "- 保温时长：8 小时",
            "使用须知",
            "杯盖的硅胶密封圈建议每 6 个月更换一次。",
        ]
    ),
)


def test_a_stated_figure_picks_the_line_whose_span_holds_it() -> None:
    out = answer("我体重 62 公斤，选多长的", [SKIS])
    assert "150 cm" in out and "135 cm" not in out


def test_an_open_span_holds_figures_beyond_its_bound() -> None:
    out = answer("体重 78 公斤选哪个板长", [SKIS])
    assert "162 cm" in out and "150 cm" not in out


def test_a_stated_height_picks_the_table_row() -> None:
    out = answer("I'm 186 cm tall, which paddle should I buy and how much is it?", [PADDLES])
    assert "459" in out and "429" not in out


def test_spans_read_closed_and_open_ranges() -> None:
    assert (50.0, 70.0) in spans("体重 50–70 kg")
    assert (0.0, 160.0) in spans("under 160 cm")
    assert any(low == 70.0 for low, _ in spans("体重 70 kg 以上"))
    assert spans("型号 BCD-468") == []
    assert span_fit(frozenset({"65"}), "体重 50–70 kg", frozenset({"体重"})) == 2.0
    assert span_fit(frozenset({"95"}), "体重 50–70 kg", frozenset({"体重"})) == 0.5
    assert span_fit(frozenset({"95"}), "板芯为杨木", frozenset()) == 1.0


def test_colloquial_question_types() -> None:
    assert question_asks("这块板啥价")[0] is Ask.PRICE
    assert question_asks("充满能跑多远")[0] is Ask.SPEC
    assert question_asks("How far does it go on one charge?")[0] is Ask.SPEC
    assert question_asks("How tall is the stand?")[0] is Ask.SPEC
    assert Ask.HOWTO in question_asks("这个咋折起来")
    assert Ask.YESNO in question_asks("能开发票不")
    assert Ask.YESNO in question_asks("有赠品没")


def test_how_far_wants_a_distance_not_the_charging_time() -> None:
    out = answer("风驰 S2 充满能跑多远", [SCOOTERS])
    assert "45 km" in out and "5 小时" not in out


def test_a_colloquial_how_to_gets_the_steps() -> None:
    out = answer("风驰 S2 咋折叠", [SCOOTERS])
    assert "折叠扣" in out


def test_a_bold_faq_question_is_the_heading_of_its_answer() -> None:
    out = answer("Can I rent skis for a day?", [RENTAL_FAQ])
    assert "120 yuan" in out
    assert "- Q:" not in out and "Can I rent skis for a day?" not in out.split("\n", 1)[1]


def test_the_words_naming_a_sibling_are_not_what_is_asked() -> None:
    # "晴川 Pro" is read by no name parser: its words must not make the Pro's price line look like the answer.
    out = answer("晴川 Pro 密封圈多久换一次", [FLASKS], query="晴川 Pro 密封圈多久换一次")
    assert "6 个月" in out


BOARDS = chunk(
    "boards",
    "浪花冲浪板系列",
    "\n".join(
        [
            "| 型号 | 板长 | 重量 | 售价 |",
            "|---|---|---|---|",
            "| 浪花 6.0 | 183 cm | 3.1 kg | 1680 元 |",
            "| 浪花 7.2 | 218 cm | 3.9 kg | 1280 元 |",
            "| 浪花 8.0 | 244 cm | 4.6 kg | 1980 元 |",
        ]
    ),
)


def test_the_cheapest_model_is_the_row_with_the_lowest_price() -> None:
    out = answer("浪花冲浪板最便宜的是哪款", [BOARDS])
    assert "1280 元" in out and "1680 元" not in out and "1980 元" not in out
    out = answer("Which of the boards is the most expensive?", [BOARDS])
    assert "1980" in out and "1280" not in out


def test_the_lightest_model_is_read_in_the_asked_unit() -> None:
    out = answer("哪款最轻，多重", [BOARDS])
    assert "3.1 kg" in out and "4.6 kg" not in out


SCOOTER_PAGE = chunk(
    "scooter-x",
    "风驰 S2 商品详情",
    "\n".join(["风驰 S2 商品详情", "规格", "风驰 S2：整车重量 14 kg，售价 2599 元。"]),
)
PARTS = chunk(
    "parts",
    "配件价格表",
    "\n".join(
        [
            "| 品类 | 商品 | 售价 |",
            "|---|---|---|",
            "| 电池 | 风驰 S2 备用电池 10Ah | 899 元 |",
            "| 车灯 | 风驰 S2 专用前灯 | 69 元 |",
        ]
    ),
)


def test_a_part_for_the_model_is_not_the_model() -> None:
    out = answer("风驰 S2 多少钱", [PARTS, SCOOTER_PAGE])
    assert "2599" in out.split("\n")[1]
    out = answer("风驰 S2 的备用电池多少钱", [PARTS, SCOOTER_PAGE])
    assert "899 元" in out


def test_model_numbers_dates_and_clock_times_are_no_stated_figures() -> None:
    assert stated_figures("XR-468 在 12 月 3 日能送吗，我 183 cm", frozenset({"468", "12", "3", "183"})) == {"183"}
    assert stated_figures("I ordered on 12 November, I'm 176 cm", frozenset({"12", "176"})) == {"176"}
    assert spans("上午 9:00–12:00") == []
    assert Ask.SPEC not in question_asks("How far ahead must I book?")


def test_the_lowest_price_of_one_model_is_not_a_repair_price() -> None:
    page = chunk(
        "board-page",
        "浪花 7.2 商品详情",
        "\n".join(
            [
                "浪花 7.2 商品详情",
                "价格",
                "浪花 7.2 标准涂装售价 1280 元。",
                "浪花 7.2 手绘涂装售价 1580 元。",
                "售后",
                "浪花 7.2 板尾修补价格为 199 元。",
            ]
        ),
    )
    out = answer("浪花 7.2 最便宜多少钱", [page])
    assert "1280 元" in out and "199 元" not in out
